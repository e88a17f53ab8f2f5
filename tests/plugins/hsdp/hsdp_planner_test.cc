// HSDP's planner: what a byte costs on each link class (against the ring's closed form), the
// cost model on cases worked by hand, and CBC's optimum against enumerating every strategy,
// also for two NIC rails that share a PCIe link.
#include <gtest/gtest.h>

#include <random>

#include "link_class_costs.h"
#include "ring.h"
#include "sim_fixtures.h"
#include "strategy_cost.h"
#include "strategy_search.h"

namespace testbed::hsdp {
namespace {

constexpr double kNvBw = 50e9, kNvLat = 1e-6, kPcieBw = 10e9, kPcieLat = 2e-6;
constexpr LinkKinds kNv = LinkKindBit(LinkKind::kNvlink), kPcie = LinkKindBit(LinkKind::kPcie);

Cluster BridgedPairs(int pairs) {
  return testing::BridgedPairs(testing::BridgedPairsSpec{pairs, 1, kNvBw, kNvLat, kPcieBw, kPcieLat});
}

std::vector<ClassCost> PairClasses() {
  const Cluster c = BridgedPairs(1);
  collectives::Ring ring(collectives::CommTuning{});
  auto costs = LinkClassCosts({0, 1}, {kNv, kPcie}, c, &ring);
  EXPECT_TRUE(costs.ok()) << costs.status();
  return *costs;
}

TEST(HsdpLinkClassCosts, ARingOverTwoDevicesMovesHalfTheBufferOverEachLink) {
  const std::vector<ClassCost> costs = PairClasses();
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_EQ(costs[0].name, "nvlink");
  EXPECT_EQ(costs[1].name, "pcie");
  // NVLink: the bridge each way, S/2 over 50 GB/s, one hop of latency.
  ASSERT_EQ(costs[0].gather.s_per_byte.size(), 2u);
  for (const auto& [link, spb] : costs[0].gather.s_per_byte) EXPECT_NEAR(spb, 0.5 / kNvBw, 1e-24);
  EXPECT_NEAR(costs[0].gather.latency_s, kNvLat, 1e-15);
  // PCIe: gpu -> cpu -> gpu each way (four links), two hops of latency.
  ASSERT_EQ(costs[1].scatter.s_per_byte.size(), 4u);
  for (const auto& [link, spb] : costs[1].scatter.s_per_byte) EXPECT_NEAR(spb, 0.5 / kPcieBw, 1e-24);
  EXPECT_NEAR(costs[1].scatter.latency_s, 2 * kPcieLat, 1e-15);
}

TEST(HsdpLinkClassCosts, ThePlannersRingIsTheSimulatorsRing) {
  const Cluster c = BridgedPairs(2);
  collectives::Ring ring(collectives::CommTuning{});
  for (const std::vector<DeviceId>& group : {std::vector<DeviceId>{0, 1}, std::vector<DeviceId>{0, 1, 2, 3},
                                             std::vector<DeviceId>{0, 2, 1, 3}}) {
    auto own = LinkClassCosts(group, {0, kPcie}, c);
    auto sim = LinkClassCosts(group, {0, kPcie}, c, &ring);
    ASSERT_TRUE(own.ok() && sim.ok());
    for (size_t k = 0; k < own->size(); ++k) {
      for (bool gather : {true, false}) {
        const OpCost& a = gather ? (*own)[k].gather : (*own)[k].scatter;
        const OpCost& b = gather ? (*sim)[k].gather : (*sim)[k].scatter;
        EXPECT_NEAR(a.latency_s, b.latency_s, 1e-15);
        ASSERT_EQ(a.s_per_byte.size(), b.s_per_byte.size());
        for (size_t i = 0; i < a.s_per_byte.size(); ++i) {
          EXPECT_EQ(a.s_per_byte[i].first, b.s_per_byte[i].first);
          EXPECT_NEAR(a.s_per_byte[i].second, b.s_per_byte[i].second, 1e-24);
        }
      }
    }
  }
}

TEST(HsdpLinkClassCosts, AClassWithoutARouteAndATwiceNamedClassAreRefused) {
  const Cluster c = BridgedPairs(2);
  collectives::Ring ring(collectives::CommTuning{});
  auto none = LinkClassCosts({0, 1, 2, 3}, {kNv, kPcie}, c, &ring);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("link class 'nvlink': no route from device"), std::string::npos) << none.status();
  auto twice = LinkClassCosts({0, 1}, {kPcie, kPcie}, c, &ring);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("named twice"), std::string::npos) << twice.status();
}

TEST(HsdpLinkClassCosts, ClassesThatMeetOnALinkAreNotIndependent) {
  const Cluster c = BridgedPairs(2);
  auto pair = LinkClassCosts({0, 1}, {kNv, kPcie}, c);
  ASSERT_TRUE(pair.ok());
  EXPECT_TRUE(CheckIndependent(*pair, c).ok());
  // Over all four devices the cluster's own ring crosses PCIe between the pairs, as the PCIe
  // ring does.
  auto four = LinkClassCosts({0, 1, 2, 3}, {0, kPcie}, c);
  ASSERT_TRUE(four.ok());
  const absl::Status shared = CheckIndependent(*four, c);
  EXPECT_EQ(shared.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(shared.message().find("'any' and 'pcie' both cross link"), std::string::npos) << shared;
}

TEST(HsdpStrategyCost, OneLayerWithoutComputeIsThreeCollectives) {
  // Gather for the forward, gather for the backward (prefetched during the forward, which
  // takes no time), scatter after the backward: three ring steps of P/2 on the class.
  Problem p{{{64e6, 0, 0}}, PairClasses(), 6};
  const double nv = 64e6 / 2 / kNvBw + kNvLat;
  EXPECT_NEAR(StrategyCost(p, SingleClass(p, 0)), 3 * nv, 1e-12);
  // Split 5/6 on NVLink, 1/6 on PCIe: each collective takes its slower class.
  Strategy split{{{5, 1}}};
  const double slower = std::max(5.0 / 6 * 64e6 / 2 / kNvBw + kNvLat, 1.0 / 6 * 64e6 / 2 / kPcieBw + 2 * kPcieLat);
  EXPECT_NEAR(StrategyCost(p, split), 3 * slower, 1e-12);
  EXPECT_LT(StrategyCost(p, split), StrategyCost(p, SingleClass(p, 0)));
}

TEST(HsdpStrategyCost, ComputeHidesThePrefetchedGathers) {
  // Two layers whose compute outlasts every collective: only the first gather and the last
  // scatter show.
  Problem p{{{1e6, 1.0, 2.0}, {1e6, 1.0, 2.0}}, PairClasses(), 2};
  const double c = 1e6 / 2 / kNvBw + kNvLat;
  EXPECT_NEAR(StrategyCost(p, SingleClass(p, 0)), c + 2 * 1.0 + 2 * 2.0 + c, 1e-12);
}

TEST(HsdpStrategyCost, InTheBackwardAGatherAndAScatterShareTheClass) {
  // Three layers, no compute, all on NVLink: the middle backward step carries the gather of
  // layer 0 and the scatter of layer 2 on the same links.
  Problem p{{{8e6, 0, 0}, {8e6, 0, 0}, {8e6, 0, 0}}, PairClasses(), 1};
  const double c = 8e6 / 2 / kNvBw + kNvLat;
  // fwd: G0, G1, G2, G2(bwd); bwd: l=2: AG1; l=1: AG0 + RS2; l=0: RS1; then RS0.
  EXPECT_NEAR(StrategyCost(p, SingleClass(p, 0)), 4 * c + c + 2 * c + c + c, 1e-12);
}

Problem RandomProblem(std::mt19937& rng, int layers, int chunks) {
  std::uniform_real_distribution<double> bytes(1e6, 200e6), compute(0, 4e-3);
  Problem p;
  p.classes = PairClasses();
  p.chunks = chunks;
  for (int l = 0; l < layers; ++l) p.layers.push_back({bytes(rng), compute(rng), compute(rng)});
  return p;
}

TEST(HsdpSearch, TheProgrammeFindsTheEnumeratedOptimum) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 12; ++trial) {
    const Problem p = RandomProblem(rng, 1 + trial % 4, 2 + trial % 5);
    auto milp = SolveMilp(p);
    auto brute = Enumerate(p);
    ASSERT_TRUE(milp.ok()) << milp.status();
    ASSERT_TRUE(brute.ok()) << brute.status();
    EXPECT_TRUE(milp->optimal);
    EXPECT_NEAR(milp->cost_s, brute->cost_s, 1e-9 * brute->cost_s) << "trial " << trial << ": "
                                                                   << Describe(p, milp->strategy) << " vs "
                                                                   << Describe(p, brute->strategy);
    for (const auto& row : milp->strategy.pieces) EXPECT_EQ(row[0] + row[1], p.chunks);
  }
}

TEST(HsdpSearch, ThreeClassesToo) {
  // Four devices in two bridged pairs; classes: NVLink is not a route between the pairs, so
  // the three are the cluster's own routes, PCIe only, and PCIe with NVLink.
  const Cluster c = BridgedPairs(2);
  collectives::Ring ring(collectives::CommTuning{});
  auto costs = LinkClassCosts({0, 1, 2, 3}, {0, kPcie, kPcie | kNv}, c, &ring);
  ASSERT_TRUE(costs.ok()) << costs.status();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 4; ++trial) {
    Problem p = RandomProblem(rng, 2, 3);
    p.classes = *costs;
    auto milp = SolveMilp(p);
    auto brute = Enumerate(p);
    ASSERT_TRUE(milp.ok() && brute.ok());
    EXPECT_NEAR(milp->cost_s, brute->cost_s, 1e-9 * brute->cost_s) << Describe(p, milp->strategy);
  }
}

TEST(HsdpSearch, CommunicationBoundLayersSplitInProportionToBandwidth) {
  Problem p{{{100e6, 0, 0}, {100e6, 0, 0}}, PairClasses(), 12};
  auto best = SolveMilp(p);
  ASSERT_TRUE(best.ok()) << best.status();
  // 50 : 10 GB/s -> 10 of 12 chunks on NVLink.
  for (const auto& row : best->strategy.pieces) EXPECT_EQ(row, (std::vector<int>{10, 2}));
  EXPECT_LT(best->cost_s, StrategyCost(p, SingleClass(p, 0)) / 1.15);
  EXPECT_EQ(Describe(p, best->strategy), "2 layers: nvlink 10/12, pcie 2/12");
}

// Two nodes of one device with two NICs behind one PCIe switch; the device's PCIe link to the
// switch (`uplink` bytes/s) carries both rails.
constexpr double kIbBw = 5e9;
Cluster TwoRails(double uplink) {
  return testing::TwoNicNodes(testing::TwoNicNodesSpec{2, uplink, kPcieBw, kPcieLat, kIbBw, 1e-6});
}

TEST(HsdpSearch, TwoNicRailsThatMeetOnAPcieLinkAddTheirLoadsThere) {
  collectives::Ring ring(collectives::CommTuning{});
  const double S = 100e6;  // per layer; no compute, so the layers' communication is the time
  for (const double uplink : {12e9, 8e9}) {
    const Cluster c = TwoRails(uplink);
    auto costs = LinkClassCosts({0, 1}, {0, NicRail(1)}, c, &ring);
    ASSERT_TRUE(costs.ok()) << costs.status();
    EXPECT_EQ((*costs)[1].name, "nic1");
    // They meet on the devices' PCIe links: not independent.
    const absl::Status meet = CheckIndependent(*costs, c);
    ASSERT_FALSE(meet.ok());
    EXPECT_NE(meet.message().find("gpu0>pcisw"), std::string::npos) << meet;
    EXPECT_NE(meet.message().find("shared_links"), std::string::npos) << meet;
    Problem p{{{S, 0, 0}, {S, 0, 0}}, *costs, 8};
    auto milp = SolveMilp(p);
    auto brute = Enumerate(p);
    ASSERT_TRUE(milp.ok() && brute.ok());
    EXPECT_NEAR(milp->cost_s, brute->cost_s, 1e-9 * brute->cost_s) << Describe(p, milp->strategy);
    // Each collective moves S/2 per device. One rail: S/2 at 5 GB/s. Both: each NIC carries its
    // share and the PCIe link all of it, so S/2 over min(2 x 5, uplink) GB/s at best.
    const double one = StrategyCost(p, SingleClass(p, 0));
    const double ratio = std::min(2 * kIbBw, uplink) / kIbBw;
    EXPECT_NEAR(one / milp->cost_s, ratio, 0.01 * ratio) << Describe(p, milp->strategy);
    if (uplink > 2 * kIbBw) {
      for (const auto& row : milp->strategy.pieces) EXPECT_EQ(row, (std::vector<int>{4, 4}));
    }
  }
}

TEST(HsdpSearch, BadProblemsAreRefused) {
  Problem none{{{1e6, 0, 0}}, {}, 4};
  EXPECT_EQ(SolveMilp(none).status().code(), absl::StatusCode::kInvalidArgument);
  Problem zero{{{1e6, 0, 0}}, PairClasses(), 0};
  EXPECT_EQ(SolveMilp(zero).status().code(), absl::StatusCode::kInvalidArgument);
  Problem big{std::vector<LayerLoad>(40, {1e6, 0, 0}), PairClasses(), 8};
  EXPECT_EQ(Enumerate(big).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testbed::hsdp
