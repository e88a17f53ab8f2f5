// Small, exactly known inputs for simulator tests: a device model with constant layer
// times, a star-shaped cluster with uniform links, GPT graphs and uniform plans.
#pragma once

#include <map>
#include <string>

#include "testbed/cluster.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"
#include "testbed/schedule.h"

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

// Heterogeneous devices: every attention or MLP layer takes `layer_fwd_s` forward on a device
// of speed 1, divided by the speed of the device's kind (DeviceSpec::name, which must be in
// `speed`) and by the work's TP degree, times its fraction; twice that backward; embedding,
// head and kernels take no time.
class SpeedDeviceModel final : public DeviceModel {
 public:
  SpeedDeviceModel(double layer_fwd_s, std::map<std::string, double> speed)
      : fwd_(layer_fwd_s), speed_(std::move(speed)) {}
  [[nodiscard]] absl::StatusOr<double> ComputeLayerTime(const LayerWork& w, const DeviceSpec& d) const override;
  [[nodiscard]] absl::StatusOr<double> KernelTime(double, double, Precision, const DeviceSpec&) const override {
    return 0.0;
  }

 private:
  double fwd_;
  std::map<std::string, double> speed_;
};

// A node type named `name` of `devices` plain test devices (1 TFLOP/s FP32, 1 GiB at 1 TB/s),
// without links: the tests add their own.
[[nodiscard]] NodeType TestNode(const std::string& name, int devices);
// `devices` devices per node, each joined to one switch by a link of `bandwidth` bytes/s and
// `link_latency_s` per direction (so device-to-device: two links, twice the latency).
[[nodiscard]] Cluster StarCluster(int devices, double bandwidth, double link_latency_s, double memory_gib = 80,
                                  int nodes = 1);
// `pairs` pairs of devices, each pair joined by an NVLink bridge (nvlink_bw, nvlink_lat) and
// every device on PCIe (pcie_bw, pcie_lat) to one CPU: the HPNV node of the group's papers
// with one socket. With several nodes, a NIC on the CPU at 5 GB/s.
struct BridgedPairsSpec {
  int pairs = 1;
  int nodes = 1;
  double nvlink_bw = 50e9, nvlink_lat = 1e-6, pcie_bw = 10e9, pcie_lat = 2e-6;
};
[[nodiscard]] Cluster BridgedPairs(const BridgedPairsSpec& spec);
// `nodes` nodes of one device with two NICs (nic_of "nic0+nic1": rails 0 and 1), each NIC on
// PCIe (pcie_bw, pcie_lat) and on InfiniBand to the fabric (ib_bw, ib_lat). With uplink_bw > 0
// both NICs sit behind one PCIe switch and the device's own PCIe link (uplink_bw, pcie_lat)
// carries both rails; otherwise each NIC has a PCIe link of its own to the device.
struct TwoNicNodesSpec {
  int nodes = 2;
  double uplink_bw = 0, pcie_bw = 10e9, pcie_lat = 2e-6, ib_bw = 5e9, ib_lat = 1.5e-6;
};
[[nodiscard]] Cluster TwoNicNodes(const TwoNicNodesSpec& spec);
[[nodiscard]] ModelGraph Gpt(int blocks, int hidden = 1024, int seq = 1024);
// A send of `bytes` from `a` to `b` on `stream` (with `priority`) and its receive, both after
// `deps`; the send's id.
TaskId AddTransfer(Schedule& s, DeviceId a, DeviceId b, std::int64_t bytes, std::uint8_t stream,
                   std::uint8_t priority = 0, const std::vector<TaskId>& deps = {});
// An H100-like device: FP32 66.9, BF16 and FP16 989.4, FP8 1978.9 TFLOP/s; 80 GiB at 3.35 TB/s.
[[nodiscard]] DeviceSpec Hopper();
// `devices` Hopper devices on one star node (400 GB/s, 1 us links).
[[nodiscard]] Cluster Hoppers(int devices);
// A Llama-3-8B-like stack of `blocks`: 4096 wide, 32 heads, 8 KV heads, SwiGLU 14336,
// sequence 4096, FlashAttention, rotary positions, untied embeddings.
[[nodiscard]] ModelGraph LlamaLike(int blocks, std::int64_t vocab);
// A GPT-style MoE stack ("moe-gpt"): `blocks` of attention and an MoE layer of `experts`
// experts, top-`top_k` routing, vocabulary 1024.
struct MoeSpec {
  int blocks = 1;
  std::int64_t hidden = 256, heads = 4, seq = 128, experts = 4, top_k = 1;
};
[[nodiscard]] ModelGraph MoeGpt(const MoeSpec& spec);
// n blocks with measured times and parameter counts (the "layers" family).
[[nodiscard]] ModelGraph MeasuredLayers(int n, double fwd_s, double bwd_s, std::int64_t params);
// Blocks split evenly over pp x chunks (embedding with the first, head with the last).
[[nodiscard]] Plan UniformPlan(const ModelGraph& model, int tp, int pp, int dp, int chunks, int micro_batches,
                               int micro_batch = 1);

}  // namespace testbed::testing
