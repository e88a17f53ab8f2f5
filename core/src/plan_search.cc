#include "testbed/plan_search.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed {

std::vector<int> UnitBoundaries(const ModelGraph& model) {
  std::vector<int> begin;
  for (int i = 0; i < static_cast<int>(model.layers.size()); ++i) {
    const Layer& l = model.layers[static_cast<size_t>(i)];
    const bool new_unit = i == 0 || l.block < 0 || model.layers[static_cast<size_t>(i - 1)].block != l.block;
    if (new_unit) begin.push_back(i);
  }
  begin.push_back(static_cast<int>(model.layers.size()));
  return begin;
}

std::vector<StageSpec> StagesFromUnitCounts(const ModelGraph& model, const std::vector<int>& parts) {
  const std::vector<int> b = UnitBoundaries(model);
  std::vector<StageSpec> out;
  int unit = 0;
  for (int n : parts) {
    out.push_back(StageSpec{b[static_cast<size_t>(unit)], b[static_cast<size_t>(unit + n)], 0});
    unit += n;
  }
  return out;
}

absl::StatusOr<std::vector<StageSpec>> UniformBlockStages(const ModelGraph& model, int parts) {
  const int units = static_cast<int>(UnitBoundaries(model).size()) - 1;
  // Units before the first block (the embedding) and after the last (the head), if any; a
  // model without blocks (an mlp, a cnn) is split over its layers alike.
  const bool has_blocks =
      std::any_of(model.layers.begin(), model.layers.end(), [](const Layer& l) { return l.block >= 0; });
  const bool first = has_blocks && model.layers.front().block < 0;
  const bool last = has_blocks && model.layers.size() > 1 && model.layers.back().block < 0;
  const int blocks = units - (first ? 1 : 0) - (last ? 1 : 0);
  if (blocks < parts) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model.shape.name, "' has ", blocks,
                                                   " blocks, fewer than the ", parts, " stages asked for"));
  }
  std::vector<int> counts(static_cast<size_t>(parts), blocks / parts);
  for (int i = 0; i < blocks % parts; ++i) ++counts[static_cast<size_t>(i)];
  if (first) counts.front() += 1;  // embedding
  if (last) counts.back() += 1;    // head
  return StagesFromUnitCounts(model, counts);
}

std::vector<int> MinMaxPartition(const std::vector<double>& weights, int parts) {
  const int n = static_cast<int>(weights.size());
  parts = std::max(1, std::min(parts, n));
  auto fits = [&](double bound) {
    int used = 1;
    double sum = 0;
    for (double w : weights) {
      if (w > bound) return false;
      if (sum + w > bound) {
        ++used;
        sum = 0;
      }
      sum += w;
    }
    return used <= parts;
  };
  double lo = *std::max_element(weights.begin(), weights.end());
  double hi = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (int it = 0; it < 100 && hi - lo > 1e-12 * std::max(1.0, hi); ++it) {
    const double mid = (lo + hi) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  // Greedy fill under the bound, leaving at least one item for every remaining part.
  std::vector<int> counts;
  int i = 0;
  for (int p = 0; p < parts; ++p) {
    const int remaining_parts = parts - p - 1;
    double sum = 0;
    int count = 0;
    while (i < n - remaining_parts && (count == 0 || sum + weights[static_cast<size_t>(i)] <= hi * (1 + 1e-12))) {
      sum += weights[static_cast<size_t>(i)];
      ++count;
      ++i;
    }
    counts.push_back(count);
  }
  counts.back() += n - i;
  return counts;
}

std::optional<std::vector<int>> MinMaxContiguousSplit(int n, int parts, const PartCost& part_cost, double upper) {
  if (parts < 1 || parts > n) return std::nullopt;
  // Whether the items split under `bound`, by the positions each part can end at: part s can
  // end at j when part s - 1 can end at some i < j with part_cost(s, i, j) <= bound; the
  // largest such i is the best (a part's cost does not grow as its range shrinks).
  std::vector<std::vector<int>> from(static_cast<size_t>(parts), std::vector<int>(static_cast<size_t>(n) + 1, -1));
  std::vector<char> prev(static_cast<size_t>(n) + 1), cur(static_cast<size_t>(n) + 1);
  // A fast certificate first: the greedy split (each part takes the most items under the
  // bound, leaving one for each later part) proves the bound when it succeeds.
  auto greedy = [&](double bound) {
    int first = 0;
    for (int s = 0; s < parts; ++s) {
      const int last = n - (parts - s - 1);
      int end = first;
      while (end < last && part_cost(s, first, end + 1) <= bound) ++end;
      if (end == first) return false;
      from[static_cast<size_t>(s)][static_cast<size_t>(end)] = first;
      first = end;
    }
    return first == n;
  };
  auto feasible = [&](double bound) {
    if (greedy(bound)) return true;
    std::fill(prev.begin(), prev.end(), 0);
    prev[0] = 1;
    for (int s = 0; s < parts; ++s) {
      std::fill(cur.begin(), cur.end(), 0);
      int last = -1;
      for (int j = 1; j <= n; ++j) {
        if (prev[static_cast<size_t>(j - 1)]) last = j - 1;
        if (last >= 0 && part_cost(s, last, j) <= bound) {
          cur[static_cast<size_t>(j)] = 1;
          from[static_cast<size_t>(s)][static_cast<size_t>(j)] = last;
        }
      }
      std::swap(prev, cur);
    }
    return prev[static_cast<size_t>(n)] != 0;
  };
  double hi = upper * (1.0 + 1e-12);
  if (!feasible(hi)) {
    hi = std::numeric_limits<double>::max();
    if (!feasible(hi)) return std::nullopt;
  }
  double lo = 0;
  for (int it = 0; it < 200 && hi - lo > 1e-9 * hi; ++it) {
    const double mid = (lo + hi) / 2;
    (feasible(mid) ? hi : lo) = mid;
  }
  (void)feasible(hi);  // leaves the split of `hi` in `from`
  std::vector<int> counts(static_cast<size_t>(parts));
  int j = n;
  for (int s = parts - 1; s >= 0; --s) {
    const int i = from[static_cast<size_t>(s)][static_cast<size_t>(j)];
    counts[static_cast<size_t>(s)] = j - i;
    j = i;
  }
  return counts;
}

void ApplyRecompute(Plan& plan) {
  for (Stage& stage : plan.stages) {
    for (StageSpec& st : stage.chunks) {
      st.recompute_layers = plan.recompute == RecomputeMode::kFull ? st.end_layer - st.first_layer : 0;
    }
  }
}

absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx, int tp, int pp, int dp, int chunks, std::int64_t micro_batch,
                              RecomputeMode recompute, const StageRule& rule) {
  const int devices = ctx.cluster.num_devices();
  const int cp = std::max(1, ctx.parallel.cp);
  if (tp < 1 || pp < 1 || chunks < 1) return absl::InvalidArgumentError("degrees must be >= 1");
  if (dp == 0) {
    if (devices % (tp * pp * cp) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tp x pp x cp = ", tp * pp * cp, " does not divide the cluster's ",
                                                     devices, " devices"));
    }
    dp = devices / (tp * pp * cp);
  }
  if (static_cast<std::int64_t>(tp) * pp * dp * cp > devices) {
    return absl::InvalidArgumentError(absl::StrCat("tp x pp x dp x cp = ", static_cast<std::int64_t>(tp) * pp * dp * cp,
                                                   " exceeds the cluster's ", devices, " devices"));
  }
  for (const Layer& l : ctx.model.layers) {
    if (l.heads > 0 && l.heads % tp != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tp ", tp, " does not divide the model's ", l.heads, " heads"));
    }
    // Load-balanced causal split: 2 x cp chunks of every sequence.
    if (cp > 1 && l.kind == LayerKind::kAttention && l.seq_len % (2 * cp) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cp ", cp, ": the sequence of ", l.seq_len, " tokens does not split "
                                                     "into 2 x cp = ", 2 * cp, " equal chunks"));
    }
  }
  GridSpec g;
  g.tp = tp;
  g.pp = pp;
  g.dp = dp * cp;
  g.virtual_stages = chunks;
  g.micro_batch = micro_batch;
  TrainSettings train = ctx.train;
  train.micro_batch = micro_batch;
  TESTBED_ASSIGN_OR_RETURN(g.micro_batches, MicroBatchesPerReplica(train, dp));
  g.recompute = recompute;
  g.sequence_parallel = ctx.parallel.sequence_parallel && tp > 1;
  g.zero_stage = ctx.parallel.zero_stage;
  TESTBED_ASSIGN_OR_RETURN(g.chunks, rule(pp, chunks));
  Plan plan = GridPlan(g);
  plan.experts.degree = std::max(1, ctx.parallel.ep);
  plan.context.degree = cp;
  plan.context.ring = ctx.parallel.cp_ring && cp > 1;
  ApplyRecompute(plan);
  return plan;
}

SearchSpace DefaultSearchSpace(const PlanningContext& ctx) {
  SearchSpace s;
  const int devices = ctx.cluster.num_devices();
  const int per_node = ctx.cluster.node_type_of(0).devices;
  const std::int64_t heads = ctx.model.shape.heads;
  for (int tp = 1; tp <= per_node && tp <= devices; tp *= 2) {
    if (heads % tp == 0 && devices % tp == 0) s.tp.push_back(tp);
  }
  const int blocks = ctx.model.NumBlocks();
  for (int pp = 1; pp <= std::min(blocks, devices); ++pp) {
    if (devices % pp == 0) s.pp.push_back(pp);
  }
  for (std::int64_t mb = 1; mb <= 64; mb *= 2) s.micro_batch.push_back(mb);
  s.recompute = {RecomputeMode::kNone, RecomputeMode::kFull};
  if (ctx.parallel.sequence_parallel) s.recompute.push_back(RecomputeMode::kSelective);
  s.chunks = ctx.parallel.virtual_stages;
  return s;
}

namespace {

}  // namespace

absl::StatusOr<MetricSet> EstimateOneFOneB(const PlanningContext& ctx, const Plan& plan) {
  double slowest = 0;
  for (int s = 0; s < plan.pp(); ++s) {
    const DeviceSpec& dev = ctx.cluster.spec_of(plan.DeviceOf(0, s, 0));
    double t = 0;
    for (int c = 0; c < plan.virtual_stages(); ++c) {
      const StageSpec& st = plan.Chunk(s, c);
      for (int l = st.first_layer; l < st.end_layer; ++l) {
        LayerWork w{&ctx.model.layers[static_cast<size_t>(l)], Phase::kForward, plan.micro_batch, plan.LayerTp(l),
                    plan.sequence_parallel, PrecisionOfBits(plan.LayerBits(l).activation_bits, ctx.train.precision),
                    1.0, false};
        TESTBED_ASSIGN_OR_RETURN(double f, ctx.device_model.LayerTime(w, dev));
        w.phase = Phase::kBackward;
        w.selective_recompute = plan.recompute == RecomputeMode::kSelective;
        TESTBED_ASSIGN_OR_RETURN(double b, ctx.device_model.LayerTime(w, dev));
        t += f + b + (l - st.first_layer < st.recompute_layers ? f : 0);
      }
    }
    slowest = std::max(slowest, t);
  }
  std::int64_t most = 0;  // micro-batches of the busiest replica
  for (const Stage& st : plan.stages) {
    for (const StageReplica& r : st.replicas) most = std::max(most, r.micro_batches);
  }
  const double time = static_cast<double>(most + plan.pp() - 1) * slowest;
  MetricSet m;
  m.Add("iteration_time_s", time, "s", Better::kLower);
  m.Add("throughput_samples_per_s", static_cast<double>(plan.SamplesPerIteration()) / std::max(time, 1e-30),
        "samples/s", Better::kHigher);
  return m;
}

namespace {

// A lower bound of a stage's memory (weights, gradients, optimizer state and one
// micro-batch's activations), to skip candidates that cannot fit without simulating them.
bool CannotFit(const PlanningContext& ctx, const Plan& plan) {
  const bool selective = plan.recompute == RecomputeMode::kSelective;
  for (int s = 0; s < plan.pp(); ++s) {
    double need = StaticBytes(StageParams(plan, ctx.model, s), ctx.train.precision, ctx.train.optimizer,
                              plan.zero_stage, plan.dp(s)).total();
    const StageSpec& st = plan.Chunk(s, 0);
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      const Layer& layer = ctx.model.layers[static_cast<size_t>(l)];
      const int tp = plan.LayerTp(l);
      need += l - st.first_layer < st.recompute_layers
                  ? CheckpointBytes(layer, static_cast<double>(plan.micro_batch), tp, plan.sequence_parallel)
                  : ActivationBytes(layer, static_cast<double>(plan.micro_batch), tp, plan.sequence_parallel,
                                    selective);
    }
    if (need > static_cast<double>(ctx.cluster.spec_of(plan.DeviceOf(0, s, 0)).memory_bytes)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<SearchResult> SearchPlans(const PlanningContext& ctx, const SearchSpace& space, const StageRule& rule) {
  SearchResult best;
  double best_throughput = -1;
  std::vector<std::string> reasons;
  const int devices = ctx.cluster.num_devices();
  const int per_node = ctx.cluster.node_type_of(0).devices;
  const int cp = std::max(1, ctx.parallel.cp);
  for (int tp : space.tp) {
    if (space.tp_within_node && tp > per_node) continue;
    for (int pp : space.pp) {
      if (devices % (tp * pp * cp) != 0) continue;
      const int dp = devices / (tp * pp * cp);
      for (std::int64_t mb : space.micro_batch) {
        if (ctx.train.global_batch > 0 && ctx.train.global_batch % (mb * dp) != 0) continue;
        for (RecomputeMode rc : space.recompute) {
          if (rc == RecomputeMode::kSelective && tp == 1) continue;
          auto plan = MakePlan(ctx, tp, pp, dp, space.chunks, mb, rc, rule);
          if (!plan.ok()) continue;
          ++best.candidates;
          if (CannotFit(ctx, *plan)) continue;
          auto metrics = ctx.evaluate ? ctx.evaluate(*plan) : EstimateOneFOneB(ctx, *plan);
          if (!metrics.ok()) {
            if (reasons.size() < 3) reasons.emplace_back(metrics.status().message());
            continue;
          }
          ++best.evaluated;
          const Metric* thr = metrics->Find("throughput_samples_per_s");
          if (thr == nullptr) continue;
          // Prefer higher throughput; among equals, the simpler plan met first.
          if (thr->value > best_throughput * (1 + 1e-9)) {
            best_throughput = thr->value;
            best.plan = std::move(*plan);
            best.metrics = std::move(*metrics);
          }
        }
      }
    }
  }
  if (best_throughput < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no plan fits: ", best.candidates, " candidates tried, none fits in memory or runs",
        reasons.empty() ? "" : absl::StrCat("; e.g. ", absl::StrJoin(reasons, "; "))));
  }
  best.plan.planner_metrics.Add("search_candidates", best.candidates, "plans");
  best.plan.planner_metrics.Add("search_evaluated", best.evaluated, "plans");
  return best;
}

}  // namespace testbed
