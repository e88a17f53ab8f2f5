// Per-layer forward and backward times from the device model: AutoPipe's profile of the
// model at sub-layer granularity (embedding, each attention and each MLP, head), and the same
// summed per transformer block for block-granular planners.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"

namespace testbed::autopipe {

struct LayerTimes {
  std::vector<double> fwd, bwd;  // per item, seconds for one micro-batch
  std::vector<int> begin;        // layer index where each item starts, plus the end
};

[[nodiscard]] absl::StatusOr<LayerTimes> SubLayerTimes(const ModelGraph& model, const DeviceModel& device_model,
                                                       const DeviceSpec& device, int tp, std::int64_t micro_batch,
                                                       bool sequence_parallel, Precision precision);
// Items grouped into the model's units (embedding, each block, head).
[[nodiscard]] LayerTimes GroupByUnit(const ModelGraph& model, const LayerTimes& sublayers);
// Stage specs from item counts.
[[nodiscard]] std::vector<StageSpec> StagesFromCounts(const LayerTimes& items, const std::vector<int>& counts);

}  // namespace testbed::autopipe
