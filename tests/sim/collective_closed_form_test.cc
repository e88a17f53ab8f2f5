// Collective algorithms against closed forms on uniform links, simulated as tasks: ring
// all-reduce of S bytes over n devices at bandwidth B and latency alpha takes
// 2(n-1)/n * S/B + 2(n-1) alpha; transfers sharing a link share its bandwidth.
#include <gtest/gtest.h>

#include "hierarchical.h"
#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "tree.h"

namespace testbed::testing {
namespace {

constexpr double kBw = 10e9, kLinkLat = 1e-6, kAlpha = 2 * kLinkLat;

SimResult SimulateSchedule(const Schedule& s, const Cluster& cluster, const Collective& coll) {
  const ModelGraph model = Gpt(1);
  ConstantDeviceModel dm(0);
  SimInputs in{model, cluster, dm, coll};
  auto r = Simulate(s, in, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

double CollectiveTime(CollectiveOp op, int n, double bytes, const Collective& coll) {
  const Cluster cluster = StarCluster(n, kBw, kLinkLat);
  Schedule s(n);
  std::vector<DeviceId> group;
  for (int i = 0; i < n; ++i) group.push_back(i);
  Task t;
  t.kind = TaskKind::kCollective;
  t.op = op;
  t.group = s.Group(group);
  t.bytes = static_cast<std::int64_t>(bytes);
  s.Add(t);
  return SimulateSchedule(s, cluster, coll).iteration_time_s;
}

TEST(CollectiveClosedForm, RingAllReduce) {
  collectives::Ring ring(collectives::CommTuning{});
  for (int n : {2, 3, 4, 8, 16}) {
    for (double S : {1e3, 1e6, 256e6}) {
      const double expected = 2.0 * (n - 1) / n * S / kBw + 2.0 * (n - 1) * kAlpha;
      EXPECT_NEAR(CollectiveTime(CollectiveOp::kAllReduce, n, S, ring), expected, expected * 1e-9)
          << "n=" << n << " S=" << S;
    }
  }
}

TEST(CollectiveClosedForm, RingAllGatherAndReduceScatterAreHalfAnAllReduce) {
  collectives::Ring ring(collectives::CommTuning{});
  const int n = 8;
  const double S = 64e6;
  const double half = (n - 1.0) / n * S / kBw + (n - 1) * kAlpha;
  EXPECT_NEAR(CollectiveTime(CollectiveOp::kAllGather, n, S, ring), half, half * 1e-9);
  EXPECT_NEAR(CollectiveTime(CollectiveOp::kReduceScatter, n, S, ring), half, half * 1e-9);
}

TEST(CollectiveClosedForm, EfficiencyScalesTheBandwidthTerm) {
  collectives::Ring ring(collectives::CommTuning{0.5, 0.0});
  const int n = 4;
  const double S = 100e6;
  const double expected = 2.0 * (n - 1) / n * S / (0.5 * kBw) + 2.0 * (n - 1) * kAlpha;
  EXPECT_NEAR(CollectiveTime(CollectiveOp::kAllReduce, n, S, ring), expected, expected * 1e-9);
}

TEST(CollectiveClosedForm, TreeBeatsRingForSmallMessagesOnManyRanks) {
  collectives::Ring ring(collectives::CommTuning{});
  collectives::Tree tree(collectives::CommTuning{});
  EXPECT_LT(CollectiveTime(CollectiveOp::kAllReduce, 16, 1e3, tree),
            CollectiveTime(CollectiveOp::kAllReduce, 16, 1e3, ring));
}

TEST(CollectiveClosedForm, HierarchicalAllReduceSendsAShardOverTheNetwork) {
  // 4 nodes x 4 devices; NICs 10x slower than the links inside a node. The hierarchical
  // algorithm moves 1/4 of the buffer over the network, a flat ring the whole ring share.
  NodeType type = TestNode("box", 4);
  type.hubs = {"switch"};
  type.nics = {"nic0"};
  const LinkSpec fast{"fast", LinkKind::kNvlink, 100e9, 0};
  for (int i = 0; i < 4; ++i) type.links.push_back({"gpu" + std::to_string(i), "switch", fast});
  type.links.push_back({"nic0", "switch", fast});
  type.nic_link = LinkSpec{"slow", LinkKind::kInfiniband, 10e9, 0};
  const Cluster cluster = *Cluster::Build("boxes", {NodeGroup{type, 4}});
  std::vector<DeviceId> all;
  for (int i = 0; i < 16; ++i) all.push_back(i);
  collectives::Ring ring(collectives::CommTuning{});
  collectives::Hierarchical hier(collectives::CommTuning{}, false);
  const double S = 160e6;
  auto time = [&](const Collective& c) {
    Schedule s(16);
    Task t;
    t.kind = TaskKind::kCollective;
    t.group = s.Group(all);
    t.bytes = static_cast<std::int64_t>(S);
    s.Add(t);
    return SimulateSchedule(s, cluster, c).iteration_time_s;
  };
  // Flat ring: each NIC carries one ring hop each way: 2 * 15/16 * S over 10 GB/s.
  EXPECT_NEAR(time(ring), 2.0 * 15 / 16 * S / 10e9, 1e-6);
  // Hierarchical: all 4 rails cross each NIC; each rail all-reduces S/4 over 4 nodes:
  // per NIC 4 * 2 * 3/4 * S/4 bytes at 10 GB/s, plus the intra-node phases on 100 GB/s links.
  const double inter = 4 * 2 * 0.75 * (S / 4) / 10e9;
  const double intra = 2 * 0.75 * S / 100e9;
  EXPECT_NEAR(time(hier), inter + intra, 1e-6);
  EXPECT_LT(time(hier), time(ring));
}

TEST(CollectiveClosedForm, AnOversubscribedLeafUplinkBoundsARingAcrossLeaves) {
  // 8 one-device nodes, leaves of 4: the ring 0..7 crosses leaf 0 -> leaf 1 once (3 -> 4) and
  // back once (7 -> 0), one flow on each uplink direction. With the uplink slower than the
  // NIC ports it is the ring's bottleneck: 2 * 7/8 * S over the uplink; with a faster one
  // the NIC ports are.
  NodeType type = TestNode("one", 1);
  type.hubs = {"switch"};
  type.nics = {"nic0"};
  const LinkSpec fast{"fast", LinkKind::kPcie, 100e9, 0};
  type.links = {{"gpu0", "switch", fast}, {"nic0", "switch", fast}};
  type.nic_link = LinkSpec{"port", LinkKind::kInfiniband, 10e9, 0};
  const double S = 80e6;
  auto ring_time = [&](double uplink) {
    ClusterOptions options;
    options.network.tiers = {NetworkTier{"leaf", 4, LinkSpec{"up", LinkKind::kInfiniband, uplink, 0}},
                             NetworkTier{"spine", 0, {}}};
    const Cluster cluster = *Cluster::Build("leaves", {NodeGroup{type, 8}}, options);
    Schedule s(8);
    Task t;
    t.kind = TaskKind::kCollective;
    t.group = s.Group({0, 1, 2, 3, 4, 5, 6, 7});
    t.bytes = static_cast<std::int64_t>(S);
    s.Add(t);
    return SimulateSchedule(s, cluster, collectives::Ring(collectives::CommTuning{})).iteration_time_s;
  };
  EXPECT_NEAR(ring_time(5e9), 2.0 * 7 / 8 * S / 5e9, 1e-9);
  EXPECT_NEAR(ring_time(40e9), 2.0 * 7 / 8 * S / 10e9, 1e-9);
}

// A send of `bytes` from `from` to `to` and its receive, both on `stream`.
void AddTransfer(Schedule& s, DeviceId from, DeviceId to, double bytes, int stream) {
  Task send;
  send.kind = TaskKind::kSend;
  send.stream = static_cast<std::uint8_t>(stream);
  send.device = from;
  send.peer = to;
  send.bytes = static_cast<std::int64_t>(bytes);
  const TaskId sid = s.Add(send);
  Task recv = send;
  recv.kind = TaskKind::kRecv;
  recv.device = to;
  recv.peer = from;
  recv.match = sid;
  s.Add(recv);
}

TEST(CollectiveClosedForm, TransfersSharingALinkShareItsBandwidth) {
  const Cluster cluster = StarCluster(3, kBw, kLinkLat);
  collectives::Ring ring(collectives::CommTuning{});
  const double S = 50e6;
  auto transfers = [&](int count) {
    Schedule s(3);
    // Devices 0 and 1 both send to device 2.
    for (int k = 0; k < count; ++k) AddTransfer(s, k, 2, S, k);
    return SimulateSchedule(s, cluster, ring);
  };
  const double alone = transfers(1).iteration_time_s;
  EXPECT_NEAR(alone, S / kBw + kAlpha, 1e-12);
  const SimResult both = transfers(2);
  // The switch-to-device-2 link carries both: each gets half of it.
  EXPECT_NEAR(both.iteration_time_s, 2 * S / kBw + kAlpha, 1e-12);
  // Link accounting: that link moved 2S and was busy the whole transfer time.
  double max_bytes = 0;
  for (const SimLinkStats& l : both.links) max_bytes = std::max(max_bytes, l.bytes);
  EXPECT_DOUBLE_EQ(max_bytes, 2 * S);
}

TEST(CollectiveClosedForm, ATransferLeftAloneSpeedsUpAndTheIterationEndsWithIt) {
  // Devices 0 and 1 send S and 2S to device 2 over a shared link (no latency): both move at
  // B/2 until the small one ends at 2S/B; the large one then has S left at B and ends at
  // 3S/B. Its first finish estimate (4S/B, at half rate) is superseded and must not stretch
  // the iteration.
  const Cluster cluster = StarCluster(3, kBw, 0.0);
  collectives::Ring ring(collectives::CommTuning{});
  const double S = 50e6;
  Schedule s(3);
  for (int k = 0; k < 2; ++k) AddTransfer(s, k, 2, S * (k + 1), k);
  const SimResult r = SimulateSchedule(s, cluster, ring);
  EXPECT_NEAR(r.task_end_s[0], 2 * S / kBw, 1e-12);
  EXPECT_NEAR(r.task_end_s[2], 3 * S / kBw, 1e-12);
  EXPECT_NEAR(r.iteration_time_s, 3 * S / kBw, 1e-12);
}

}  // namespace
}  // namespace testbed::testing
