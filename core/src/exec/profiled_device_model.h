// A device model for the machine the executor runs on, calibrated by a short profile: each
// layer's forward and backward for one micro-batch timed alone on one core (median of a few
// runs). Ranks sharing the machine's cores is the simulator's part (SimOptions::shared_cores). It lets the simulator predict a real run
// of the same schedule, and the difference is the simulator's measured error.
#pragma once

#include <map>
#include <utility>

#include "absl/status/statusor.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"

namespace testbed::exec {

class ProfiledDeviceModel final : public DeviceModel {
 public:
  // Profiles every layer of `graph` with `micro_batch` sequences, sharded over `tp` ranks.
  [[nodiscard]] static absl::StatusOr<ProfiledDeviceModel> Profile(const ModelGraph& graph, std::int64_t micro_batch,
                                                                   int tp, int repeats,
                                                                   double memory_bandwidth_bytes_per_s);
  [[nodiscard]] absl::StatusOr<double> ComputeLayerTime(const LayerWork& work, const DeviceSpec& device) const override;
  [[nodiscard]] absl::StatusOr<double> KernelTime(double flops, double bytes, Precision precision,
                                                  const DeviceSpec& device) const override;

 private:
  ProfiledDeviceModel(const ModelGraph& graph) : graph_(&graph) {}
  const ModelGraph* graph_;
  std::map<std::pair<int, int>, double> times_;  // (layer, phase) -> seconds
  double bandwidth_ = 1e10;
};

// Bytes per second of a large memcpy on this machine (the links of the executor's "cluster").
[[nodiscard]] double MeasureMemcpyBandwidth();

}  // namespace testbed::exec
