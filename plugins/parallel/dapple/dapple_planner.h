// The DAPPLE-style planner: DAPPLE splits the model recursively, a first stage and the best
// plan of the rest, and scores each split with its pipeline latency model. Here the stages
// are contiguous runs of whole layers (embedding, blocks, head) on one tensor-parallel group
// each, replicated over the same data-parallel degree (the testbed's plans are uniform: no
// per-stage replication or device placement policies).
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
