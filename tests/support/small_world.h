// A tiny model and cluster for tests that call planners directly.
#pragma once

#include "testbed/cluster.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"

namespace testbed::testing {

// 2 blocks, hidden 64, 4 heads, 16 tokens, vocab 100: embedding, 2 x (attention, MLP), head.
inline ModelGraph SmallModel() {
  ModelShape s;
  s.name = "small";
  s.layers = 2;
  s.hidden = 64;
  s.heads = 4;
  s.seq_len = 16;
  s.vocab = 100;
  return BuildModelGraph(s).value();
}

// One node of `devices` devices on a switch; 1 TFLOP/s fp16, 0.5 TFLOP/s fp32.
inline Cluster SmallCluster(int devices = 1) {
  NodeType t;
  t.name = "unit-node";
  t.device.name = "unit";
  t.device.peak_flops[Precision::kFp16] = 1e12;
  t.device.peak_flops[Precision::kFp32] = 0.5e12;
  t.device.memory_bytes = 1LL << 30;
  t.device.memory_bandwidth_bytes_per_s = 1e11;
  t.devices = devices;
  t.hubs = {"sw"};
  for (int i = 0; i < devices; ++i) {
    t.links.push_back({"gpu" + std::to_string(i), "sw", LinkSpec{"l", LinkKind::kPcie, 1e10, 1e-6}});
  }
  return Cluster::Build("small", {NodeGroup{t, 1}}).value();
}

class NullDeviceModel final : public DeviceModel {
 public:
  absl::StatusOr<double> ComputeLayerTime(const LayerWork&, const DeviceSpec&) const override { return 0.0; }
  absl::StatusOr<double> KernelTime(double, double, Precision, const DeviceSpec&) const override { return 0.0; }
};

}  // namespace testbed::testing
