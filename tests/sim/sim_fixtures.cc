#include "sim_fixtures.h"

#include "absl/strings/str_cat.h"

namespace testbed::testing {

absl::StatusOr<double> ConstantDeviceModel::ComputeLayerTime(const LayerWork& w, const DeviceSpec&) const {
  if (w.layer->kind != LayerKind::kAttention && w.layer->kind != LayerKind::kMlp) return 0.0;
  const double t = fwd_ * w.fraction;
  return w.phase == Phase::kBackward ? 2 * t : t;
}

absl::StatusOr<double> SpeedDeviceModel::ComputeLayerTime(const LayerWork& w, const DeviceSpec& d) const {
  if (w.layer->kind != LayerKind::kAttention && w.layer->kind != LayerKind::kMlp) return 0.0;
  const auto it = speed_.find(d.name);
  if (it == speed_.end()) return absl::InvalidArgumentError("SpeedDeviceModel: no speed for device '" + d.name + "'");
  const double t = fwd_ / it->second * w.fraction / w.tp;
  return w.phase == Phase::kBackward ? 2 * t : t;
}

NodeType TestNode(const std::string& name, int devices) {
  NodeType type;
  type.name = name;
  type.devices = devices;
  type.device.name = "gpu";
  type.device.peak_flops[Precision::kFp32] = 1e12;
  type.device.memory_bytes = 1 << 30;
  type.device.memory_bandwidth_bytes_per_s = 1e12;
  return type;
}

Cluster BridgedPairs(const BridgedPairsSpec& spec) {
  NodeType type = TestNode("pairs", 2 * spec.pairs);
  type.hubs = {"cpu0"};
  const LinkSpec pcie{"pcie", LinkKind::kPcie, spec.pcie_bw, spec.pcie_lat};
  const LinkSpec nvlink{"bridge", LinkKind::kNvlink, spec.nvlink_bw, spec.nvlink_lat};
  for (int i = 0; i < type.devices; ++i) type.links.push_back({absl::StrCat("gpu", i), "cpu0", pcie});
  for (int p = 0; p < spec.pairs; ++p) type.links.push_back({absl::StrCat("gpu", 2 * p), absl::StrCat("gpu", 2 * p + 1), nvlink});
  if (spec.nodes > 1) {
    type.nics = {"nic0"};
    type.links.push_back({"nic0", "cpu0", pcie});
    type.nic_link = LinkSpec{"ib", LinkKind::kInfiniband, 5e9, 1e-6};
  }
  return *Cluster::Build("pairs", {NodeGroup{type, spec.nodes}});
}

Cluster TwoNicNodes(const TwoNicNodesSpec& spec) {
  NodeType type = TestNode("two-rails", 1);
  const LinkSpec pcie{"pcie", LinkKind::kPcie, spec.pcie_bw, spec.pcie_lat};
  if (spec.uplink_bw > 0) {
    type.hubs = {"pcisw"};
    type.links = {{"gpu0", "pcisw", LinkSpec{"uplink", LinkKind::kPcie, spec.uplink_bw, spec.pcie_lat}},
                  {"nic0", "pcisw", pcie},
                  {"nic1", "pcisw", pcie}};
  } else {
    type.links = {{"gpu0", "nic0", pcie}, {"gpu0", "nic1", pcie}};
  }
  type.nics = {"nic0", "nic1"};
  type.nic_of = {"nic0+nic1"};
  type.nic_link = LinkSpec{"ib", LinkKind::kInfiniband, spec.ib_bw, spec.ib_lat};
  return *Cluster::Build("two-rails", {NodeGroup{type, spec.nodes}});
}

ModelGraph MeasuredLayers(int n, double fwd_s, double bwd_s, std::int64_t params) {
  ModelShape s;
  s.name = "measured";
  s.family = "layers";
  GivenLayer g;
  g.name = "block";
  g.fwd_s = fwd_s;
  g.bwd_s = bwd_s;
  g.params = params;
  g.repeat = n;
  s.given = {g};
  return *BuildModelGraph(s);
}

Cluster StarCluster(int devices, double bandwidth, double link_latency_s, double memory_gib, int nodes) {
  NodeType type;
  type.name = "star";
  type.devices = devices;
  type.device.name = "test-gpu";
  type.device.peak_flops[Precision::kFp16] = 100e12;
  type.device.peak_flops[Precision::kFp32] = 50e12;
  type.device.memory_bytes = static_cast<std::int64_t>(memory_gib * 1073741824.0);
  type.device.memory_bandwidth_bytes_per_s = 1e12;
  type.hubs = {"switch"};
  LinkSpec link{"uniform", LinkKind::kOther, bandwidth, link_latency_s};
  for (int i = 0; i < devices; ++i) type.links.push_back({absl::StrCat("gpu", i), "switch", link});
  if (nodes > 1) {
    type.nics = {"nic0"};
    type.links.push_back({"nic0", "switch", link});
    type.nic_link = link;
  }
  return *Cluster::Build("star", {NodeGroup{type, nodes}});
}

TaskId AddTransfer(Schedule& s, DeviceId a, DeviceId b, std::int64_t bytes, std::uint8_t stream,
                   std::uint8_t priority, const std::vector<TaskId>& deps) {
  Task send;
  send.kind = TaskKind::kSend;
  send.stream = stream;
  send.device = a;
  send.peer = b;
  send.bytes = bytes;
  send.priority = priority;
  const TaskId id = s.Add(send, deps);
  Task recv = send;
  recv.kind = TaskKind::kRecv;
  recv.device = b;
  recv.peer = a;
  s.Link(s.Add(recv, deps), id);
  return id;
}

ModelGraph Gpt(int blocks, int hidden, int seq) {
  ModelShape s;
  s.name = "test-gpt";
  s.layers = blocks;
  s.hidden = hidden;
  s.heads = hidden / 64;
  s.seq_len = seq;
  s.vocab = 1024;
  return *BuildModelGraph(s);
}

Plan UniformPlan(const ModelGraph& model, int tp, int pp, int dp, int chunks, int micro_batches, int micro_batch) {
  GridSpec g;
  g.tp = tp;
  g.pp = pp;
  g.dp = dp;
  g.virtual_stages = chunks;
  g.micro_batch = micro_batch;
  g.micro_batches = micro_batches;
  const int parts = pp * chunks;
  const int blocks = model.NumBlocks();
  g.chunks = UniformStages(blocks, parts);
  // Block b is layers 1 + 2b and 2 + 2b; the embedding (0) and head (last) attach to the ends.
  for (size_t i = 0; i < g.chunks.size(); ++i) {
    const int fb = g.chunks[i].first_layer, eb = g.chunks[i].end_layer;
    g.chunks[i].first_layer = i == 0 ? 0 : 1 + 2 * fb;
    g.chunks[i].end_layer = i + 1 == g.chunks.size() ? static_cast<int>(model.layers.size()) : 1 + 2 * eb;
  }
  return GridPlan(g);
}

DeviceSpec Hopper() {
  DeviceSpec d;
  d.name = "hopper";
  d.peak_flops = {{Precision::kFp32, 66.9e12},
                  {Precision::kBf16, 989.4e12},
                  {Precision::kFp16, 989.4e12},
                  {Precision::kFp8, 1978.9e12}};
  d.memory_bytes = std::int64_t{80} << 30;
  d.memory_bandwidth_bytes_per_s = 3.35e12;
  return d;
}

Cluster Hoppers(int devices) {
  NodeType type = StarCluster(devices, 400e9, 1e-6).node_type_of(0);
  type.device = Hopper();
  return *Cluster::Build("hopper", {NodeGroup{type, 1}});
}

ModelGraph MoeGpt(const MoeSpec& spec) {
  ModelShape s;
  s.name = "test-moe";
  s.family = "moe-gpt";
  s.layers = spec.blocks;
  s.hidden = spec.hidden;
  s.heads = spec.heads;
  s.seq_len = spec.seq;
  s.vocab = 1024;
  s.experts = spec.experts;
  s.top_k = spec.top_k;
  return *BuildModelGraph(s);
}

ModelGraph LlamaLike(int blocks, std::int64_t vocab) {
  ModelShape m;
  m.name = "llama-ish";
  m.family = "gpt";
  m.layers = blocks;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.seq_len = 4096;
  m.vocab = vocab;
  m.ffn = "swiglu";
  m.attention = "flash";
  m.positions = "rope";
  m.tied_embeddings = false;
  return *BuildModelGraph(m);
}

}  // namespace testbed::testing
