// Piper's dynamic programme over a chain of layers: the first j layers in k stages, minimising
// the largest stage load (time per sample up to a constant), each stage choosing activation
// recomputation only when it needs it to fit in memory or it is cheaper. Exact for its model.
// The testbed's plans fix the data- and tensor-parallel degrees for every stage, so Piper's
// per-stage choice of those degrees is not searched.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "stage_cost_model.h"

namespace testbed::piper {

struct PiperPlan {
  std::vector<int> counts;       // units per stage
  std::vector<bool> recompute;   // per stage
  double max_load = 0;           // seconds per iteration of the busiest stage
  int evaluated = 0;
};

// Errors: InvalidArgument for more stages than units, ResourceExhausted when no split fits.
[[nodiscard]] absl::StatusOr<PiperPlan> PlanPiper(const std::vector<Unit>& units, const Environment& env);

}  // namespace testbed::piper
