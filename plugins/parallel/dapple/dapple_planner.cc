#include "dapple_planner.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace testbed::dapple {
namespace {

StageLoad LoadOf(const UnitCosts& u, int first, int end, int stage, int pp, const StageEnvironment& env) {
  StageLoad l;
  double params = 0;
  for (int i = first; i < end; ++i) {
    l.f += u.fwd[static_cast<size_t>(i)];
    l.b += u.bwd[static_cast<size_t>(i)];
    params += u.params[static_cast<size_t>(i)];
  }
  if (stage + 1 < pp) {
    l.send = u.output_bytes[static_cast<size_t>(end - 1)] * env.seconds_per_byte[static_cast<size_t>(stage)] +
             env.boundary_latency[static_cast<size_t>(stage)];
  }
  l.allreduce = params * env.allreduce_s_per_param[static_cast<size_t>(stage)];
  return l;
}

}  // namespace

std::vector<StageLoad> LoadsOf(const UnitCosts& units, const std::vector<int>& counts, const StageEnvironment& env) {
  std::vector<StageLoad> loads;
  const int pp = static_cast<int>(counts.size());
  int first = 0;
  for (int s = 0; s < pp; ++s) {
    loads.push_back(LoadOf(units, first, first + counts[static_cast<size_t>(s)], s, pp, env));
    first += counts[static_cast<size_t>(s)];
  }
  return loads;
}

absl::StatusOr<DapplePlan> PlanDapple(const UnitCosts& units, int pp, int m, const StageEnvironment& env) {
  const int n = static_cast<int>(units.fwd.size());
  if (pp < 1 || pp > n) return absl::InvalidArgumentError(absl::StrCat("cannot split ", n, " layers into ", pp, " stages"));
  struct Best {
    std::vector<int> counts;
    std::vector<StageLoad> loads;
    double latency = std::numeric_limits<double>::infinity();
  };
  // best[k][j]: units [j, n) on the last k stages (absolute stages pp-k .. pp-1).
  std::vector<std::vector<Best>> best(static_cast<size_t>(pp) + 1, std::vector<Best>(static_cast<size_t>(n) + 1));
  DapplePlan out;
  for (int j = 0; j < n; ++j) {
    Best& b = best[1][static_cast<size_t>(j)];
    b.counts = {n - j};
    b.loads = {LoadOf(units, j, n, pp - 1, pp, env)};
    b.latency = PipelineLatency(b.loads, m).seconds;
  }
  for (int k = 2; k <= pp; ++k) {
    const int stage = pp - k;
    for (int j = 0; j + k <= n; ++j) {
      if (k == pp && j != 0) continue;  // only the whole model needs all stages
      Best& b = best[static_cast<size_t>(k)][static_cast<size_t>(j)];
      for (int e = j + 1; e + (k - 1) <= n; ++e) {
        const Best& rest = best[static_cast<size_t>(k - 1)][static_cast<size_t>(e)];
        if (rest.counts.empty()) continue;
        std::vector<StageLoad> loads;
        loads.reserve(static_cast<size_t>(k));
        loads.push_back(LoadOf(units, j, e, stage, pp, env));
        loads.insert(loads.end(), rest.loads.begin(), rest.loads.end());
        const double latency = PipelineLatency(loads, m).seconds;
        ++out.evaluated;
        if (latency < b.latency) {
          b.latency = latency;
          b.loads = std::move(loads);
          b.counts = {e - j};
          b.counts.insert(b.counts.end(), rest.counts.begin(), rest.counts.end());
        }
      }
    }
  }
  const Best& whole = best[static_cast<size_t>(pp)][0];
  if (whole.counts.empty()) return absl::InternalError("dapple: no split found");
  out.counts = whole.counts;
  out.latency = PipelineLatency(whole.loads, m);
  return out;
}

}  // namespace testbed::dapple
