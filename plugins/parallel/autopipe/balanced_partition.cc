#include "balanced_partition.h"

#include <algorithm>
#include <deque>
#include <set>

#include "absl/strings/str_cat.h"
#include "min_max_dp.h"
#include "program_timing.h"
#include "testbed/status_macros.h"

namespace testbed::autopipe {
namespace {

using Kind = PipelineOp::Kind;

struct StageLoads {
  std::vector<double> f, b;
};

StageLoads Loads(const std::vector<double>& fwd, const std::vector<double>& bwd, const std::vector<int>& counts) {
  StageLoads l;
  size_t i = 0;
  for (int c : counts) {
    double f = 0, b = 0;
    for (int k = 0; k < c; ++k, ++i) {
      f += fwd[i];
      b += bwd[i];
    }
    l.f.push_back(f);
    l.b.push_back(b);
  }
  return l;
}

// The critical stage: the last stage whose steady phase (from its first backward to its last
// forward) has no idle time; AutoPipe looks from the back because, among equally loaded
// stages, the later one dominates. None without bubbles: the most loaded stage.
int CriticalStage(const PipelineProgram& program, const ProgramTiming& t, const StageLoads& loads) {
  const int pp = static_cast<int>(program.stages.size());
  for (int s = pp - 1; s >= 0; --s) {
    const auto& ops = program.stages[static_cast<size_t>(s)];
    size_t first_bwd = ops.size(), last_fwd = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == Kind::kBackward && first_bwd == ops.size()) first_bwd = i;
      if (ops[i].kind == Kind::kForward) last_fwd = i;
    }
    if (first_bwd >= ops.size() || last_fwd < first_bwd) continue;
    double idle = 0;
    for (size_t i = first_bwd + 1; i <= last_fwd; ++i) {
      idle += t.start_s[static_cast<size_t>(s)][i] - t.end_of[static_cast<size_t>(s)][i - 1];
    }
    const double busy = t.end_of[static_cast<size_t>(s)][last_fwd] - t.start_s[static_cast<size_t>(s)][first_bwd];
    if (idle <= 1e-9 * std::max(busy, 1e-30)) return s;
  }
  int best = 0;
  for (int s = 1; s < pp; ++s) {
    const size_t i = static_cast<size_t>(s), b = static_cast<size_t>(best);
    if (loads.f[i] + loads.b[i] >= loads.f[b] + loads.b[b]) best = s;
  }
  return best;
}

}  // namespace

absl::StatusOr<PartitionScore> ScorePartition(const std::vector<double>& fwd, const std::vector<double>& bwd,
                                              const std::vector<int>& counts) {
  const int pp = static_cast<int>(counts.size());
  const StageLoads loads = Loads(fwd, bwd, counts);
  const PipelineProgram program = OneFOneBProgram(pp, 2 * pp);
  OpCost cost = [&loads](int s, Kind kind, double) {
    return kind == Kind::kBackward ? loads.b[static_cast<size_t>(s)] : loads.f[static_cast<size_t>(s)];
  };
  TESTBED_ASSIGN_OR_RETURN(ProgramTiming t, TimeProgram(program, cost));
  return PartitionScore{t.end_s, CriticalStage(program, t, loads)};
}

absl::StatusOr<BalancedPartition> PlanPartition(const std::vector<double>& fwd, const std::vector<double>& bwd,
                                                int stages, bool heuristic, int max_candidates) {
  const int n = static_cast<int>(fwd.size());
  if (stages < 1 || stages > n || bwd.size() != fwd.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot split ", n, " sub-layers into ", stages, " stages"));
  }
  std::vector<double> w(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) w[static_cast<size_t>(i)] = fwd[static_cast<size_t>(i)] + bwd[static_cast<size_t>(i)];
  const PrefixMinMax dp(w, stages);

  BalancedPartition out;
  out.counts = dp.Counts(n, stages);
  TESTBED_ASSIGN_OR_RETURN(out.score, ScorePartition(fwd, bwd, out.counts));
  out.dp_score = out.score;
  out.candidates = 1;
  if (!heuristic || stages == 1) return out;

  auto consider = [&](const std::vector<int>& counts) -> absl::StatusOr<PartitionScore> {
    TESTBED_ASSIGN_OR_RETURN(PartitionScore s, ScorePartition(fwd, bwd, counts));
    ++out.candidates;
    // Strictly faster only: among equals the earlier (the dynamic programme's) stays.
    if (s.iteration_s < out.score.iteration_s * (1 - 1e-12)) {
      out.score = s;
      out.counts = counts;
    }
    return s;
  };
  std::deque<std::pair<std::vector<int>, PartitionScore>> queue = {{out.counts, out.score}};
  std::set<std::vector<int>> seen = {out.counts};
  while (!queue.empty() && out.candidates < max_candidates) {
    auto [cur, score] = queue.front();
    queue.pop_front();
    const int c = score.critical_stage;
    std::vector<int> begin(static_cast<size_t>(stages) + 1, 0);
    for (int s = 0; s < stages; ++s) begin[static_cast<size_t>(s) + 1] = begin[static_cast<size_t>(s)] + cur[static_cast<size_t>(s)];
    const StageLoads loads = Loads(fwd, bwd, cur);
    auto load = [&](int s) { return loads.f[static_cast<size_t>(s)] + loads.b[static_cast<size_t>(s)]; };

    // 1. Behind the critical stage: pull blocks forward, one stage at a time, while the
    //    receiving stage stays lighter than the critical one (the cool-down runs the later
    //    stages' backwards after the critical stage's last one).
    {
      std::vector<int> adj = cur;
      std::vector<double> adj_load(static_cast<size_t>(stages));
      for (int s = 0; s < stages; ++s) adj_load[static_cast<size_t>(s)] = load(s);
      int first = begin[static_cast<size_t>(c) + 1];
      for (int s = c + 1; s + 1 < stages && out.candidates < max_candidates; ++s) {
        first += adj[static_cast<size_t>(s)];  // first item of stage s + 1
        const double moved = w[static_cast<size_t>(first)];
        if (adj[static_cast<size_t>(s) + 1] <= 1 || adj_load[static_cast<size_t>(s)] + moved >= load(c)) continue;
        ++adj[static_cast<size_t>(s)];
        --adj[static_cast<size_t>(s) + 1];
        adj_load[static_cast<size_t>(s)] += moved;
        adj_load[static_cast<size_t>(s) + 1] -= moved;
        ++first;
        if (seen.insert(adj).second) TESTBED_RETURN_IF_ERROR(consider(adj).status());
      }
    }
    // 2. Move the critical stage's first block to the front; the stages before it are
    //    re-balanced over the longer prefix by the dynamic programme.
    if (c > 0 && cur[static_cast<size_t>(c)] > 1) {
      const int prefix = begin[static_cast<size_t>(c)] + 1;
      std::vector<int> next = dp.Counts(prefix, c);
      next.push_back(cur[static_cast<size_t>(c)] - 1);
      for (int s = c + 1; s < stages; ++s) next.push_back(cur[static_cast<size_t>(s)]);
      if (seen.insert(next).second && out.candidates < max_candidates) {
        TESTBED_ASSIGN_OR_RETURN(PartitionScore s, consider(next));
        queue.emplace_back(next, s);
      }
    }
    // 3. Move the critical stage's last block to the next stage; the stages up to the critical
    //    one are re-balanced over the shorter prefix. Kept only if the critical stage does not
    //    move back.
    if (c > 0 && c + 1 < stages && cur[static_cast<size_t>(c)] > 1) {
      const int prefix = begin[static_cast<size_t>(c) + 1] - 1;
      if (prefix >= c + 1) {
        std::vector<int> next = dp.Counts(prefix, c + 1);
        next.push_back(cur[static_cast<size_t>(c) + 1] + 1);
        for (int s = c + 2; s < stages; ++s) next.push_back(cur[static_cast<size_t>(s)]);
        if (seen.insert(next).second && out.candidates < max_candidates) {
          TESTBED_ASSIGN_OR_RETURN(PartitionScore s, consider(next));
          if (s.critical_stage <= c) queue.emplace_back(next, s);
        }
      }
    }
  }
  return out;
}

}  // namespace testbed::autopipe
