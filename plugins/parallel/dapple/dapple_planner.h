// The DAPPLE-style planner: a first stage plus the best plan of the rest, recursively, scored by
// DAPPLE's latency model, over contiguous runs of whole layers (the testbed's uniform plans: no
// per-stage replication or placement policies).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "dapple_latency.h"
#include "unit_costs.h"

namespace testbed::dapple {

struct DapplePlan {
  std::vector<int> counts;  // units per stage
  Latency latency;
  int evaluated = 0;        // splits scored
};

// `boundary(s)`: stage s's activation transfer time per byte and latency to stage s + 1 are
// folded into `send_s(bytes, s)`; `allreduce_s(params, s)` gives a stage's gradient sync time.
struct StageEnvironment {
  std::vector<double> seconds_per_byte;   // per stage boundary (pp - 1)
  std::vector<double> boundary_latency;   // per stage boundary
  std::vector<double> allreduce_s_per_param;  // per stage
};

[[nodiscard]] absl::StatusOr<DapplePlan> PlanDapple(const UnitCosts& units, int pp, int micro_batches,
                                                    const StageEnvironment& env);

// Loads of the stages of `counts` (units per stage) in `env`.
[[nodiscard]] std::vector<StageLoad> LoadsOf(const UnitCosts& units, const std::vector<int>& counts,
                                             const StageEnvironment& env);

}  // namespace testbed::dapple
