// Small, exactly known inputs for simulator tests: a device model with constant layer
// times, a star-shaped cluster with uniform links, GPT graphs and uniform plans.
#pragma once

#include "testbed/cluster.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"

namespace testbed::testing {

// Every attention or MLP layer takes `layer_fwd_s` forward (and recompute) and twice that
// backward; embedding, head and kernels take no time.
class ConstantDeviceModel final : public DeviceModel {
 public:
  explicit ConstantDeviceModel(double layer_fwd_s) : fwd_(layer_fwd_s) {}
  [[nodiscard]] absl::StatusOr<double> ComputeLayerTime(const LayerWork& w, const DeviceSpec&) const override;
  [[nodiscard]] absl::StatusOr<double> KernelTime(double, double, Precision, const DeviceSpec&) const override {
    return 0.0;
  }

 private:
  double fwd_;
};

// `devices` devices per node, each joined to one switch by a link of `bandwidth` bytes/s and
// `link_latency_s` per direction (so device-to-device: two links, twice the latency).
[[nodiscard]] Cluster StarCluster(int devices, double bandwidth, double link_latency_s, double memory_gib = 80,
                                  int nodes = 1);
[[nodiscard]] ModelGraph Gpt(int blocks, int hidden = 1024, int seq = 1024);
// Blocks split evenly over pp x chunks (embedding with the first, head with the last).
[[nodiscard]] Plan UniformPlan(const ModelGraph& model, int tp, int pp, int dp, int chunks, int micro_batches,
                               int micro_batch = 1);

}  // namespace testbed::testing
