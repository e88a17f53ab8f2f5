// Self-describing tasks (core v3): an all-to-all-v with its own size per (sender, receiver),
// copies between host memory and devices that share PCIe with each other, and layers at a
// precision of their own; each against a hand-worked case.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ring.h"
#include "roofline_model.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/memory_model.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr double kBw = 10e9, kLat = 1e-6;

SimResult RunTasks(const Schedule& s, const Cluster& cluster) {
  const ModelGraph model = Gpt(1);
  const ConstantDeviceModel dm(0);
  const collectives::Ring ring(collectives::CommTuning{});
  auto r = Simulate(s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

TEST(TaskWork, AllToAllVTakesItsMostLoadedLinkOverItsBandwidth) {
  // Three devices on one switch, one link each way per device. Sizes in MB from row to column:
  //   [ 0 100 200 ]   device 0 sends 300, receives 300
  //   [ 300 0  0  ]   device 1 sends 300, receives 100 + 400 = 500 (the busiest link)
  //   [ 0 400  0  ]   device 2 sends 400, receives 200
  const Cluster cluster = StarCluster(3, kBw, kLat);
  Schedule s(3);
  Task t;
  t.kind = TaskKind::kCollective;
  t.op = CollectiveOp::kAllToAllV;
  t.group = s.Group({0, 1, 2});
  constexpr std::int64_t MB = 1000000;
  t.work = s.AddWork(AllToAllVWork{{0, 100 * MB, 200 * MB, 300 * MB, 0, 0, 0, 400 * MB, 0}});
  s.Add(t);
  ASSERT_TRUE(s.Check().ok()) << s.Check();
  const SimResult r = RunTasks(s, cluster);
  EXPECT_NEAR(r.iteration_time_s, 500.0 * MB / kBw + 2 * kLat, 1e-12);
  // Per link: each device's uplink carries what it sends, its downlink what it receives.
  double busiest = 0;
  for (const SimLinkStats& l : r.links) busiest = std::max(busiest, l.bytes);
  EXPECT_DOUBLE_EQ(busiest, 500.0 * MB);
}

TEST(TaskWork, AnAllToAllVWithTheWrongNumberOfSizesIsRefused) {
  Schedule s(3);
  Task t;
  t.kind = TaskKind::kCollective;
  t.op = CollectiveOp::kAllToAllV;
  t.group = s.Group({0, 1, 2});
  t.work = s.AddWork(AllToAllVWork{{1, 2, 3, 4}});
  s.Add(t);
  const absl::Status st = s.Check();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("lists 4 sizes for a group of 3 (n x n expected)"), std::string::npos) << st;
}

// One socket (host memory) above a PCIe switch with two GPUs and a NIC: the switch's uplink
// to the socket is the shared link.
Cluster PcieNode(int nodes) {
  NodeType type;
  type.name = "pcie-node";
  type.devices = 2;
  type.device.name = "test-gpu";
  type.device.peak_flops[Precision::kFp16] = 100e12;
  type.device.memory_bytes = std::int64_t{24} << 30;
  type.device.memory_bandwidth_bytes_per_s = 1e12;
  type.hubs = {"cpu0", "sw0"};
  type.nics = {"nic0"};
  const LinkSpec uplink{"x16", LinkKind::kPcie, kBw, kLat};
  const LinkSpec fast{"fast", LinkKind::kPcie, 4 * kBw, kLat};
  type.links = {{"cpu0", "sw0", uplink}, {"gpu0", "sw0", fast}, {"gpu1", "sw0", fast}, {"nic0", "cpu0", fast}};
  type.nic_link = LinkSpec{"ib", LinkKind::kInfiniband, kBw, kLat};
  return *Cluster::Build("pcie", {NodeGroup{type, nodes}});
}

Task Copy(Schedule& s, DeviceId device, std::int64_t bytes) {
  Task t;
  t.kind = TaskKind::kCopy;
  t.stream = streams::kHostCopy;
  t.device = device;
  t.bytes = bytes;
  t.work = s.AddWork(CopyWork{true, -1});
  return t;
}

TEST(TaskWork, TwoGpusUnderOnePcieSwitchShareItsBandwidthFromTheHost) {
  const Cluster cluster = PcieNode(1);
  EXPECT_EQ(cluster.NumHosts(0), 1);
  EXPECT_EQ(cluster.NearestHost(1), 0);
  constexpr std::int64_t X = 800000000;
  // Route: socket -> switch (kBw) -> GPU (4 kBw): two links of latency kLat.
  const double alone = static_cast<double>(X) / kBw + 2 * kLat;
  {
    Schedule s(2);
    s.Add(Copy(s, 0, X));
    EXPECT_NEAR(RunTasks(s, cluster).iteration_time_s, alone, 1e-12);
  }
  {
    Schedule s(2);
    s.Add(Copy(s, 0, X));
    s.Add(Copy(s, 1, X));
    // Both cross the socket-to-switch link at once: each gets half of it.
    EXPECT_NEAR(RunTasks(s, cluster).iteration_time_s, 2.0 * X / kBw + 2 * kLat, 1e-12);
  }
}

TEST(TaskWork, CopiesContendWithNetworkTrafficOnSharedPcieLinks) {
  // A copy out of GPU 0 to its host and a send from GPU 0 to the other node both cross the
  // switch-to-socket link (the NIC hangs off the socket).
  const Cluster cluster = PcieNode(2);
  constexpr std::int64_t X = 800000000;
  auto make = [&](bool with_send) {
    Schedule s(4);
    Task c = Copy(s, 0, X);
    c.work = s.AddWork(CopyWork{false, 0});
    s.Add(c);
    if (with_send) {
      Task send;
      send.kind = TaskKind::kSend;
      send.stream = streams::kPipelineComm;
      send.device = 0;
      send.peer = 2;
      send.bytes = X;
      const TaskId id = s.Add(send);
      Task recv = send;
      recv.kind = TaskKind::kRecv;
      recv.stream = streams::kPipelineRecv;
      recv.device = 2;
      recv.peer = 0;
      s.Link(s.Add(recv), id);
    }
    return RunTasks(s, cluster).iteration_time_s;
  };
  const double copy_alone = make(false);
  EXPECT_NEAR(copy_alone, static_cast<double>(X) / kBw + 2 * kLat, 1e-12);
  // Together they halve the switch-to-socket link: both need 2X / kBw to cross it (plus the
  // send's longer path latency).
  const double both = make(true);
  EXPECT_GT(both, 2.0 * static_cast<double>(X) / kBw);
  EXPECT_LT(both, 2.0 * static_cast<double>(X) / kBw + 20 * kLat);
}

TEST(TaskWork, AHostThatTheNodeDoesNotHaveIsNamed) {
  const Cluster cluster = PcieNode(1);
  auto route = cluster.HostRoute(0, 3, true);
  ASSERT_FALSE(route.ok());
  EXPECT_NE(route.status().message().find("host 3 does not exist"), std::string::npos) << route.status();
}

TEST(TaskWork, ALayerAtEightBitsCostsTheInt8PeakAndHoldsHalfTheActivations) {
  // A device whose int8 peak is three times its fp16 peak; a roofline with no overheads and
  // full efficiency, so every kernel's time is its FLOPs over the peak or its bytes over the
  // bandwidth.
  const ModelGraph model = Gpt(1, 1024, 512);
  const Cluster base = StarCluster(1, kBw, kLat);
  NodeType type = base.node_type_of(0);
  type.device.peak_flops[Precision::kInt8] = 3 * type.device.PeakFlops(Precision::kFp16);
  const Cluster cluster = *Cluster::Build("int8", {NodeGroup{type, 1}});
  roofline::RooflineParams rp;
  rp.gemm_efficiency = rp.batched_gemm_efficiency = rp.memory_efficiency = 1.0;
  rp.gemm_half_gflops = 0;
  rp.launch_overhead_s = 0;
  const roofline::RooflineModel dm(rp);
  const int mlp = 2;  // embedding, block0.attention, block0.mlp, head
  ASSERT_EQ(model.layers[mlp].kind, LayerKind::kMlp);
  auto simulate = [&](int bits) {
    GridSpec g;
    g.micro_batch = 4;
    g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
    Plan plan = GridPlan(g);
    // The other layers at 32 bits, so the MLP is a task of its own at either width.
    plan.layers.assign(model.layers.size(), LayerSetting{0, LayerPrecision{32, 32, 32}});
    plan.layers[mlp].precision = LayerPrecision{bits, bits, bits};
    TrainSettings train;
    train.optimizer_step = false;
    SchedulingContext ctx{model, cluster, plan, train, dm};
    auto s = ExpandPipeline(ctx, OneFOneBProgram(1, 1), ExpandOptions{});
    EXPECT_TRUE(s.ok()) << s.status();
    const collectives::Ring ring(collectives::CommTuning{});
    auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
    EXPECT_TRUE(r.ok()) << r.status();
    // The MLP's own forward task and its work entry.
    double fwd = 0, act = 0;
    for (TaskId id = 0; id < static_cast<TaskId>(s->size()); ++id) {
      const Task& t = s->task(id);
      if (t.kind == TaskKind::kCompute && t.phase == Phase::kForward && t.first_layer == mlp) {
        fwd = r->task_end_s[static_cast<size_t>(id)] - r->task_start_s[static_cast<size_t>(id)];
        act = s->compute(id).activation_bytes;
        EXPECT_EQ(s->compute(id).precision, bits == 8 ? Precision::kInt8 : Precision::kFp16);
      }
    }
    return std::pair(fwd, act);
  };
  const auto [t16, a16] = simulate(16);
  const auto [t8, a8] = simulate(8);
  // What the device model says for the MLP at each precision.
  LayerWork w{&model.layers[mlp], Phase::kForward, 4, 1, false, Precision::kFp16, 1.0};
  const double want16 = *dm.LayerTime(w, cluster.spec_of(0));
  w.precision = Precision::kInt8;
  const double want8 = *dm.LayerTime(w, cluster.spec_of(0));
  EXPECT_DOUBLE_EQ(t16, want16);
  EXPECT_DOUBLE_EQ(t8, want8);
  // By hand from the fp16 kernels: at int8 each kernel's arithmetic runs at three times the
  // peak and its bytes are halved.
  double hand8 = 0;
  w.precision = Precision::kFp16;
  const DeviceSpec& dev = cluster.spec_of(0);
  for (const Kernel& k : LayerKernels(w)) {
    hand8 += std::max(k.flops / (3 * dev.PeakFlops(Precision::kFp16)), k.bytes / 2 / dev.memory_bandwidth_bytes_per_s);
  }
  EXPECT_NEAR(t8, hand8, 1e-9 * t16);
  EXPECT_LT(t8, t16 / 2);
  EXPECT_DOUBLE_EQ(a16, ActivationBytes(model.layers[mlp], 4, 1, false, false));
  EXPECT_DOUBLE_EQ(a8, a16 / 2);
}

}  // namespace
}  // namespace testbed::testing
