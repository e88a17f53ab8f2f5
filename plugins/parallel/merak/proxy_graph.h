// Merak's proxy graph: the model's sub-layers (where Merak's graph sharding may cut a pre-LN
// transformer) weighted by the device model's forward + backward time, and the min-max split
// of that chain into stages.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"

namespace testbed::merak {

// Forward + backward seconds of each layer for one micro-batch on `device`.
[[nodiscard]] absl::StatusOr<std::vector<double>> LayerCosts(const ModelGraph& model, const DeviceModel& device_model,
                                                             const DeviceSpec& device, int tp, std::int64_t micro_batch,
                                                             bool sequence_parallel, Precision precision);

// `parts` contiguous stages of layers minimising the most expensive stage (exact min-max).
[[nodiscard]] absl::StatusOr<std::vector<StageSpec>> BalancedStages(const std::vector<double>& costs, int parts);

}  // namespace testbed::merak
