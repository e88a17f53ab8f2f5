// Transfers pinned to one link class (Task::links, Cluster::Over): routes that cross only the
// allowed kinds, a clear error where there is none, and the closed form of concurrent
// transfers on two link classes: an all-gather on NVLink and one on PCIe between the same two
// devices share no link, so each ends at its own isolated time; two on PCIe share its links
// and take twice as long. Routes "via-nic": two devices of one node through their own NICs
// and back, beside NVLink.
#include <gtest/gtest.h>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

namespace testbed::testing {
namespace {

constexpr double kNvBw = 50e9, kNvLat = 1e-6, kPcieBw = 10e9, kPcieLat = 2e-6;

Cluster BridgedPairs(int pairs, int nodes = 1) {
  return testing::BridgedPairs(BridgedPairsSpec{pairs, nodes, kNvBw, kNvLat, kPcieBw, kPcieLat});
}

std::vector<LinkKind> KindsOf(const Cluster& c, const std::vector<LinkId>& route) {
  std::vector<LinkKind> kinds;
  for (LinkId l : route) kinds.push_back(c.links()[static_cast<size_t>(l)].spec.kind);
  return kinds;
}

TEST(LinkClasses, ViewsRouteOverTheirKindsOnly) {
  const Cluster c = BridgedPairs(2);
  EXPECT_EQ(KindsOf(c, c.Route(0, 1)), std::vector<LinkKind>{LinkKind::kNvlink});  // the fastest
  const Cluster pcie = c.Over(LinkKindBit(LinkKind::kPcie));
  EXPECT_EQ(KindsOf(pcie, pcie.Route(0, 1)), (std::vector<LinkKind>{LinkKind::kPcie, LinkKind::kPcie}));
  // The same path as the cluster's route to a device of the other pair, whose only way is PCIe.
  EXPECT_EQ(pcie.Route(0, 1).front(), c.Route(0, 2).front());
  EXPECT_NEAR(pcie.PathBandwidth(0, 1), kPcieBw, 1);
  EXPECT_NEAR(pcie.PathLatency(0, 1), 2 * kPcieLat, 1e-15);
  const Cluster nv = c.Over(LinkKindBit(LinkKind::kNvlink));
  EXPECT_EQ(nv.Route(0, 1), c.Route(0, 1));
  EXPECT_TRUE(nv.Route(0, 2).empty());  // no NVLink between the pairs
  EXPECT_TRUE(nv.CheckRoutes({0, 1}).ok());
  const absl::Status across = nv.CheckRoutes({0, 1, 2});
  EXPECT_EQ(across.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(across.message().find("no route from device 0 to device 2"), std::string::npos) << across;
  EXPECT_NE(across.message().find("nvlink"), std::string::npos) << across;
  // Every kind, or none named: the cluster's own routes.
  EXPECT_EQ(c.Over(kAllLinkKinds).route_kinds(), 0);
  EXPECT_EQ(c.Over(kAllLinkKinds).Route(0, 1), c.Route(0, 1));
}

TEST(LinkClasses, BetweenNodesTheNetworkKindMustBeAllowed) {
  const Cluster c = BridgedPairs(1, 2);
  EXPECT_TRUE(c.Over(LinkKindBit(LinkKind::kPcie)).Route(0, 2).empty());
  const Cluster net = c.Over(LinkKindBit(LinkKind::kPcie) | LinkKindBit(LinkKind::kInfiniband));
  EXPECT_EQ(net.Route(0, 2), c.Route(0, 2));
  // From gpu1 the cluster's best route to the NIC is over PCIe already; a view over
  // NVLink and InfiniBand alone has none.
  EXPECT_TRUE(c.Over(LinkKindBit(LinkKind::kNvlink) | LinkKindBit(LinkKind::kInfiniband)).Route(1, 2).empty());
}

TEST(LinkClasses, NamesParseAndPrint) {
  EXPECT_EQ(LinkKindsName(LinkKindBit(LinkKind::kPcie) | LinkKindBit(LinkKind::kCpuInterconnect)), "pcie+cpu");
  EXPECT_EQ(LinkKindsName(0), "any");
  EXPECT_EQ(*LinkKindsFromName("nvlink"), LinkKindBit(LinkKind::kNvlink));
  EXPECT_EQ(*LinkKindsFromName("pcie,infiniband"), LinkKindBit(LinkKind::kPcie) | LinkKindBit(LinkKind::kInfiniband));
  EXPECT_EQ(*LinkKindsFromName("any"), 0);
  EXPECT_EQ(*LinkKindsFromName("via-nic"), kViaNics);
  EXPECT_EQ(*LinkKindsFromName("pcie+infiniband+via-nic"),
            LinkKindBit(LinkKind::kPcie) | LinkKindBit(LinkKind::kInfiniband) | kViaNics);
  EXPECT_EQ(LinkKindsName(kViaNics), "via-nic");
  EXPECT_EQ(LinkKindsName(kAllLinkKinds | kViaNics), "via-nic");
  EXPECT_EQ(LinkKindsName(LinkKindBit(LinkKind::kPcie) | kViaNics), "pcie+via-nic");
  // NIC rails: nic0 is the usual route and adds nothing; "any" adds nothing beside a rail.
  EXPECT_EQ(*LinkKindsFromName("nic1"), NicRail(1));
  EXPECT_EQ(*LinkKindsFromName("nic0"), 0);
  EXPECT_EQ(*LinkKindsFromName("any+nic3"), NicRail(3));
  EXPECT_EQ(*LinkKindsFromName("via-nic+nic15"), kViaNics | NicRail(15));
  EXPECT_EQ(NicRailOf(*LinkKindsFromName("nvlink+infiniband+nic2")), 2);
  EXPECT_EQ(LinkKindsName(NicRail(1)), "nic1");
  EXPECT_EQ(LinkKindsName(kViaNics | NicRail(2)), "via-nic+nic2");
  EXPECT_EQ(LinkKindsName(LinkKindBit(LinkKind::kPcie) | NicRail(1)), "pcie+nic1");
  for (const char* wrong : {"nic16", "nic1+nic2", "nicx", "nic", "nvlink+any"}) {
    const auto r = LinkKindsFromName(wrong);
    ASSERT_FALSE(r.ok()) << wrong;
    EXPECT_NE(r.status().message().find(wrong), std::string::npos) << r.status();
  }
  EXPECT_NE(LinkKindsFromName("nic16").status().message().find("out of range (nic0 to nic15)"), std::string::npos);
  EXPECT_NE(LinkKindsFromName("nic1+nic2").status().message().find("more than one NIC rail"), std::string::npos);
  EXPECT_NE(LinkKindsFromName("nvlink+any").status().message().find("'any' joins only"), std::string::npos);
  const auto bad = LinkKindsFromName("nvlink+pci");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown link kind 'pci'"), std::string::npos) << bad.status();
}

struct Gather {
  LinkKinds links;
  std::uint8_t stream;
  double bytes;
};

SimResult RunGathers(const Cluster& cluster, const std::vector<DeviceId>& group, const std::vector<Gather>& gathers) {
  Schedule s(cluster.num_devices());
  for (const Gather& g : gathers) {
    Task t;
    t.kind = TaskKind::kCollective;
    t.op = CollectiveOp::kAllGather;
    t.stream = g.stream;
    t.links = g.links;
    t.group = s.Group(group);
    t.bytes = static_cast<std::int64_t>(g.bytes);
    s.Add(t);
  }
  const ModelGraph model = Gpt(1);
  ConstantDeviceModel dm(0);
  collectives::Ring ring(collectives::CommTuning{});
  auto r = Simulate(s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

constexpr LinkKinds kNv = LinkKindBit(LinkKind::kNvlink), kPcie = LinkKindBit(LinkKind::kPcie);

TEST(LinkClasses, ConcurrentGathersOnTwoLinkClassesEndAtTheirIsolatedTimes) {
  const Cluster c = BridgedPairs(1);
  const double S = 64e6;
  // Ring all-gather over two devices: one step of S/2 at the path's bandwidth after its latency.
  const double nv = S / 2 / kNvBw + kNvLat, pcie = S / 2 / kPcieBw + 2 * kPcieLat;
  const SimResult both = RunGathers(c, {0, 1}, {{kNv, streams::kParamComm, S}, {kPcie, streams::kDataComm, S}});
  ASSERT_EQ(both.task_end_s.size(), 2u);
  EXPECT_NEAR(both.task_end_s[0], nv, nv * 1e-9);
  EXPECT_NEAR(both.task_end_s[1], pcie, pcie * 1e-9);
  EXPECT_NEAR(both.iteration_time_s, std::max(nv, pcie), pcie * 1e-9);
  // Each link class was busy for its own transfer's time (a link is held from its phase's
  // start, latency included), at the same time.
  double nv_busy = 0, pcie_busy = 0;
  for (size_t l = 0; l < both.links.size(); ++l) {
    const LinkKind kind = c.links()[l].spec.kind;
    if (both.links[l].bytes == 0) continue;
    (kind == LinkKind::kNvlink ? nv_busy : pcie_busy) = both.links[l].busy_s;
  }
  EXPECT_NEAR(nv_busy, nv, 1e-12);
  EXPECT_NEAR(pcie_busy, pcie, 1e-12);
  // The same two on PCIe share its links: each moves at half its rate.
  const SimResult shared = RunGathers(c, {0, 1}, {{kPcie, streams::kParamComm, S}, {kPcie, streams::kDataComm, S}});
  EXPECT_NEAR(shared.iteration_time_s, 2 * (S / 2) / kPcieBw + 2 * kPcieLat, 1e-12);
  // Unpinned, both take the bridge and share it.
  const SimResult best = RunGathers(c, {0, 1}, {{0, streams::kParamComm, S}, {0, streams::kDataComm, S}});
  EXPECT_NEAR(best.iteration_time_s, 2 * (S / 2) / kNvBw + kNvLat, 1e-12);
}

TEST(LinkClasses, SplittingByBandwidthUsesBothClassesAtOnce) {
  // HSDP's point on one pair: bytes split in proportion to the two classes' bandwidths end
  // together, at S/2 over their summed bandwidth (plus the slower latency), sooner than the
  // whole buffer on the faster link.
  const Cluster c = BridgedPairs(1);
  const double S = 120e6;
  const double on_nv = S * kNvBw / (kNvBw + kPcieBw);
  const SimResult split = RunGathers(c, {0, 1}, {{kNv, streams::kParamComm, on_nv}, {kPcie, streams::kDataComm, S - on_nv}});
  const double expected = S / 2 / (kNvBw + kPcieBw) + 2 * kPcieLat;
  EXPECT_NEAR(split.iteration_time_s, expected, 1e-9);
  EXPECT_LT(split.iteration_time_s, S / 2 / kNvBw + kNvLat);
}

// One node of two devices bridged by NVLink, each with its own NIC behind a PCIe link (as a
// rail-optimised DGX node has).
constexpr double kIbBw = 5e9, kIbLat = 1.5e-6;
Cluster NodeWithNicPerDevice() {
  NodeType type = TestNode("rails", 2);
  const LinkSpec pcie{"pcie", LinkKind::kPcie, kPcieBw, kPcieLat};
  type.links = {{"gpu0", "gpu1", LinkSpec{"bridge", LinkKind::kNvlink, kNvBw, kNvLat}},
                {"gpu0", "nic0", pcie},
                {"gpu1", "nic1", pcie}};
  type.nics = {"nic0", "nic1"};
  type.nic_of = {"nic0", "nic1"};
  type.nic_link = LinkSpec{"ib", LinkKind::kInfiniband, kIbBw, kIbLat};
  return *Cluster::Build("rails", {NodeGroup{type, 1}});
}

TEST(LinkClasses, ViaNicRoutesLeaveTheNodeThroughTheirOwnNics) {
  const Cluster c = NodeWithNicPerDevice();
  EXPECT_EQ(KindsOf(c, c.Route(0, 1)), std::vector<LinkKind>{LinkKind::kNvlink});
  const Cluster via = c.Over(kViaNics);
  EXPECT_EQ(via.route_kinds(), kViaNics);
  // Out through nic0, up to the switch, down to nic1 and in.
  EXPECT_EQ(KindsOf(via, via.Route(0, 1)), (std::vector<LinkKind>{LinkKind::kPcie, LinkKind::kInfiniband,
                                                                 LinkKind::kInfiniband, LinkKind::kPcie}));
  EXPECT_NEAR(via.PathBandwidth(0, 1), kIbBw, 1);
  EXPECT_NEAR(via.PathLatency(0, 1), 2 * kPcieLat + 2 * kIbLat, 1e-15);
  // The two directions cross no link in common, and neither crosses the bridge.
  for (LinkId l : via.Route(0, 1)) {
    for (LinkId m : via.Route(1, 0)) EXPECT_NE(l, m);
    for (LinkId m : c.Route(0, 1)) EXPECT_NE(l, m);
  }
  // Kinds still restrict every link: without InfiniBand there is no such route.
  EXPECT_TRUE(c.Over(LinkKindBit(LinkKind::kPcie) | kViaNics).Route(0, 1).empty());
  EXPECT_FALSE(c.Over(LinkKindBit(LinkKind::kPcie) | LinkKindBit(LinkKind::kInfiniband) | kViaNics).Route(0, 1).empty());
  // A node without NICs has none, and the error says why.
  const absl::Status none = BridgedPairs(1).Over(kViaNics).CheckRoutes({0, 1});
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("through NICs (via-nic)"), std::string::npos) << none;
}

TEST(LinkClasses, GathersOnNvlinkAndViaNicsEndAtTheirIsolatedTimes) {
  const Cluster c = NodeWithNicPerDevice();
  const double S = 64e6;
  const double nv = S / 2 / kNvBw + kNvLat, via = S / 2 / kIbBw + 2 * kPcieLat + 2 * kIbLat;
  const SimResult both = RunGathers(c, {0, 1}, {{kNv, streams::kParamComm, S}, {kViaNics, streams::kParamComm2, S}});
  ASSERT_EQ(both.task_end_s.size(), 2u);
  EXPECT_NEAR(both.task_end_s[0], nv, nv * 1e-9);
  EXPECT_NEAR(both.task_end_s[1], via, via * 1e-9);
}

Cluster NodesWithTwoNicsPerDevice(int nodes, double uplink_bw = 0) {
  return TwoNicNodes(TwoNicNodesSpec{nodes, uplink_bw, kPcieBw, kPcieLat, kIbBw, kIbLat});
}

TEST(LinkClasses, ANicRailLeavesTheNodesThroughEachDevicesNicOfThatRail) {
  const Cluster c = NodesWithTwoNicsPerDevice(2);
  auto names = [&](const Cluster& view, DeviceId a, DeviceId b) {
    std::vector<std::string> out;
    for (LinkId l : view.Route(a, b)) out.push_back(view.links()[static_cast<size_t>(l)].name);
    return out;
  };
  // The usual route is rail 0; nic1 takes the second NIC on both sides.
  EXPECT_EQ(names(c, 0, 1), (std::vector<std::string>{"n0.gpu0>nic0", "n0.nic0>fabric", "fabric>n1.nic0",
                                                      "n1.nic0>gpu0"}));
  EXPECT_EQ(c.Over(0).Route(0, 1), c.Route(0, 1));
  const Cluster rail1 = c.Over(NicRail(1));
  EXPECT_EQ(rail1.route_kinds(), NicRail(1));
  EXPECT_EQ(names(rail1, 0, 1), (std::vector<std::string>{"n0.gpu0>nic1", "n0.nic1>fabric", "fabric>n1.nic1",
                                                          "n1.nic1>gpu0"}));
  for (LinkId l : rail1.Route(0, 1)) {
    for (LinkId m : c.Route(0, 1)) EXPECT_NE(l, m);
  }
  // A rail restricts only the NICs: kinds still restrict every link.
  EXPECT_TRUE(c.Over(LinkKindBit(LinkKind::kPcie) | NicRail(1)).Route(0, 1).empty());
  EXPECT_EQ(c.Over(LinkKindBit(LinkKind::kPcie) | LinkKindBit(LinkKind::kInfiniband) | NicRail(1)).Route(0, 1),
            rail1.Route(0, 1));
  // A rail the devices do not have: no route, and the error names the rail and nic_of.
  const absl::Status none = c.Over(NicRail(2)).CheckRoutes({0, 1});
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("NIC of rail 2 (nic2"), std::string::npos) << none;
  EXPECT_NE(none.message().find("nic_of"), std::string::npos) << none;
}

TEST(LinkClasses, GathersOnTwoNicRailsEndAtTheirIsolatedTimesUnlessTheyShareALink) {
  // Ring all-gather over two nodes: one step of S/2 over PCIe, the NIC's link up and down
  // and PCIe, at the InfiniBand bandwidth (the slowest), after the four links' latencies.
  const double S = 64e6;
  const double alone = S / 2 / kIbBw + 2 * kPcieLat + 2 * kIbLat;
  const Cluster own = NodesWithTwoNicsPerDevice(2);
  const SimResult both = RunGathers(own, {0, 1}, {{0, streams::kParamComm, S}, {NicRail(1), streams::kParamComm2, S}});
  ASSERT_EQ(both.task_end_s.size(), 2u);
  EXPECT_NEAR(both.task_end_s[0], alone, alone * 1e-9);
  EXPECT_NEAR(both.task_end_s[1], alone, alone * 1e-9);
  // Both unpinned: the same rail, shared, twice as long.
  const SimResult same = RunGathers(own, {0, 1}, {{0, streams::kParamComm, S}, {0, streams::kParamComm2, S}});
  EXPECT_NEAR(same.iteration_time_s, 2 * (S / 2) / kIbBw + 2 * kPcieLat + 2 * kIbLat, alone * 1e-9);
  // Behind one PCIe switch the device's PCIe link carries both rails. Under a 12 GB/s
  // uplink (more than the two 5 GB/s rails together) both run at the rail's own rate; under an 8 GB/s one each gets half of it, 4 GB/s. The path to the switch
  // adds one PCIe hop's latency on each side.
  const double lat = 4 * kPcieLat + 2 * kIbLat;
  const SimResult wide = RunGathers(NodesWithTwoNicsPerDevice(2, 12e9), {0, 1},
                                    {{0, streams::kParamComm, S}, {NicRail(1), streams::kParamComm2, S}});
  EXPECT_NEAR(wide.iteration_time_s, S / 2 / kIbBw + lat, 1e-12);
  const Cluster narrow = NodesWithTwoNicsPerDevice(2, 8e9);
  const SimResult one = RunGathers(narrow, {0, 1}, {{NicRail(1), streams::kParamComm2, S}});
  EXPECT_NEAR(one.iteration_time_s, S / 2 / kIbBw + lat, 1e-12);
  const SimResult two = RunGathers(narrow, {0, 1}, {{0, streams::kParamComm, S}, {NicRail(1), streams::kParamComm2, S}});
  EXPECT_NEAR(two.iteration_time_s, S / 2 / 4e9 + lat, 1e-12);
}

TEST(LinkClasses, NicOfListsEachDevicesRailsAndNamesAnUnknownOne) {
  NodeType type = TestNode("two-rails", 1);
  type.links = {{"gpu0", "nic0", LinkSpec{"pcie", LinkKind::kPcie, kPcieBw, kPcieLat}}};
  type.nics = {"nic0"};
  type.nic_of = {"nic0+nic7"};
  type.nic_link = LinkSpec{"ib", LinkKind::kInfiniband, kIbBw, kIbLat};
  auto c = Cluster::Build("bad", {NodeGroup{type, 2}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("nic_of[0] names 'nic7', which is not one of its nics"), std::string::npos)
      << c.status();
}

TEST(LinkClasses, APinnedCollectiveWithoutARouteIsAnErrorNamingTheTask) {
  const Cluster c = BridgedPairs(2);
  Schedule s(4);
  Task t;
  t.kind = TaskKind::kCollective;
  t.op = CollectiveOp::kAllGather;
  t.links = kNv;
  t.group = s.Group({0, 1, 2, 3});
  t.bytes = 1 << 20;
  s.Add(t);
  const ModelGraph model = Gpt(1);
  ConstantDeviceModel dm(0);
  collectives::Ring ring(collectives::CommTuning{});
  auto r = Simulate(s, SimInputs{model, c, dm, ring}, SimOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("on nvlink links"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("no route from device"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace testbed::testing
