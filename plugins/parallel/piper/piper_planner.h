// Piper's dynamic programme over a chain of whole layers: the split into stages with the smallest
// largest stage load that fits in memory, each stage recomputing only when it must. Exact for its
// model; per-stage data- and tensor-parallel degrees are not searched.
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
