// Merak's automatic partitioner works on a proxy graph of the model: a chain of nodes cut
// where no tensor but the last one crosses (in a pre-LN transformer: every attention and MLP
// sub-layer boundary), each weighted by its cost. Here a node is a layer of the ModelGraph and
// its weight the device model's forward plus backward time; stages balance these weights.
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
