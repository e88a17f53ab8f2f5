// H2 on small heterogeneous clusters, each against a reference: a host-staged cross-vendor
// transfer costs its two PCIe crossings and the host copy on top of the device-direct route
// (closed form, planned and simulated); the vendor-hierarchical all-reduce is the sum of its
// three ring phases; HeteroPP gives a two-type pipeline the split that balances the chips and
// the closed-form 1F1B throughput; HeteroAuto's choice against every layout of the same space
// scored by the same simulator (the gap is printed); bad layouts are refused by name.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "h2_partitioners.h"
#include "hetero_plan.h"
#include "hetero_search.h"
#include "hetero_split.h"
#include "hierarchical.h"
#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::h2 {
namespace {

constexpr double kFabricBw = 100e9, kFabricLat = 1e-6, kPcieBw = 20e9, kPcieLat = 2e-6, kNicBw = 10e9,
                 kNicLat = 3e-6;


// A node of `devices` chips of `name` (vendor `vendor`) on one fabric switch, each chip and
// the NIC on PCIe to the host.
NodeType Node(const std::string& name, const std::string& vendor, int devices, double memory_gib = 80,
              double link_scale = 1) {
  NodeType type;
  type.name = name + "-node";
  type.devices = devices;
  type.device.name = name;
  type.device.vendor = vendor;
  type.device.peak_flops[Precision::kFp32] = 10e12;
  type.device.peak_flops[Precision::kFp16] = 100e12;
  type.device.memory_bytes = static_cast<std::int64_t>(memory_gib * 1073741824.0);
  type.device.memory_bandwidth_bytes_per_s = 1e12;
  type.hubs = {"fabric", "cpu0"};
  type.nics = {"nic0"};
  const LinkSpec fabric{"fabric", LinkKind::kNvlink, kFabricBw * link_scale, kFabricLat / link_scale};
  const LinkSpec pcie{"pcie", LinkKind::kPcie, kPcieBw * link_scale, kPcieLat / link_scale};
  for (int i = 0; i < devices; ++i) {
    type.links.push_back({absl::StrCat("gpu", i), "fabric", fabric});
    type.links.push_back({absl::StrCat("gpu", i), "cpu0", pcie});
  }
  type.links.push_back({"nic0", "cpu0", pcie});
  type.nic_link = LinkSpec{"nic", LinkKind::kInfiniband, kNicBw * link_scale, kNicLat / link_scale};
  return type;
}

Cluster Mixed(const std::vector<NodeType>& nodes, CrossVendorPath path = CrossVendorPath::kDeviceDirect,
              double copy_bw = 5e9) {
  std::vector<NodeGroup> groups;
  for (const NodeType& n : nodes) groups.push_back(NodeGroup{n, 1});
  ClusterOptions options;
  options.cross_vendor = path;
  options.host_copy_bytes_per_s = copy_bw;
  auto c = Cluster::Build("mixed", std::move(groups), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

double Simulated(const Schedule& s, const Cluster& cluster, const Collective& coll) {
  const ModelGraph model = testing::Gpt(1);
  testing::ConstantDeviceModel dm(0);
  auto r = Simulate(s, SimInputs{model, cluster, dm, coll}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->iteration_time_s : -1;
}

TEST(H2CrossVendor, AHostStagedTransferAddsTwoPcieCrossingsAndTheCopy) {
  const double S = 64e6, copy = 5e9;
  collectives::Ring ring(collectives::CommTuning{});
  // gpu0 of node 0 (vendor x) to gpu0 of node 1 (vendor y): gpu > cpu > nic > fabric > nic >
  // cpu > gpu, the NIC the slowest link.
  const double direct = 4 * kPcieLat + 2 * kNicLat + S / kNicBw;
  const double staged = direct + (kPcieLat + S / kPcieBw) + S / copy + (kPcieLat + S / kPcieBw);
  for (CrossVendorPath path : {CrossVendorPath::kDeviceDirect, CrossVendorPath::kHostStaged}) {
    const Cluster c = Mixed({Node("x", "vx", 2), Node("y", "vy", 2)}, path, copy);
    const DeviceId b = 2;
    ASSERT_TRUE(c.CrossesVendors(0, b));
    ASSERT_FALSE(c.CrossesVendors(0, 1));
    auto plan = ring.PlanTransfer(0, b, static_cast<std::int64_t>(S), c);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const double want = path == CrossVendorPath::kHostStaged ? staged : direct;
    EXPECT_NEAR(plan->IsolatedTime(c), want, want * 1e-12) << CrossVendorPathName(path);
    Schedule s(c.num_devices());
    testing::AddTransfer(s, 0, b, static_cast<std::int64_t>(S), 0);
    EXPECT_NEAR(Simulated(s, c, ring), want, want * 1e-9) << CrossVendorPathName(path);
    // Inside one vendor nothing is staged: over the fabric switch.
    auto inside = ring.PlanTransfer(0, 1, static_cast<std::int64_t>(S), c);
    ASSERT_TRUE(inside.ok());
    EXPECT_NEAR(inside->IsolatedTime(c), 2 * kFabricLat + S / kFabricBw, 1e-15);
  }
  // Of one vendor, two device kinds are not a crossing.
  const Cluster same = Mixed({Node("x", "v", 2), Node("y", "v", 2)}, CrossVendorPath::kHostStaged, copy);
  EXPECT_FALSE(same.CrossesVendors(0, 2));
  auto plan = ring.PlanTransfer(0, 2, static_cast<std::int64_t>(S), same);
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(plan->IsolatedTime(same), direct, direct * 1e-12);
}

TEST(H2CrossVendor, TheVendorHierarchicalAllReduceIsItsThreeRingPhases) {
  // Two vendors of two chips each (one node each). Reduce-scatter inside each vendor (two
  // chips over the fabric: S/2 each way), all-reduce of each S/2 shard across the vendors (two
  // rings of two, both through the NICs: 2 x S/2 / 2 = S/2 per ring per NIC, two rings share
  // each NIC), all-gather inside.
  const double S = 64e6;
  const collectives::CommTuning tuning{};
  const Cluster c = Mixed({Node("x", "vx", 2), Node("y", "vy", 2)});
  auto plan = collectives::VendorHierarchicalPlan(CollectiveOp::kAllReduce, {0, 1, 2, 3}, S, c, tuning);
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->phases.size(), 3u);
  const double intra = 2 * kFabricLat + (S / 2) / kFabricBw;  // one step of S/2
  const double across = 2 * (4 * kPcieLat + 2 * kNicLat) + 2 * (2 * (S / 2) / 2) / kNicBw;
  EXPECT_NEAR(plan->IsolatedTime(c), 2 * intra + across, (2 * intra + across) * 1e-12);
  // The flat ring crosses the NIC with the whole ring share, so `auto` takes the hierarchy.
  collectives::Hierarchical autoc(tuning, true);
  auto chosen = autoc.PlanCollective(CollectiveOp::kAllReduce, {0, 1, 2, 3}, static_cast<std::int64_t>(S), c);
  ASSERT_TRUE(chosen.ok());
  EXPECT_LE(chosen->IsolatedTime(c), plan->IsolatedTime(c) * (1 + 1e-12));
  EXPECT_LT(plan->IsolatedTime(c), collectives::RingPlan(CollectiveOp::kAllReduce, {0, 1, 2, 3}, S, c, tuning)
                                       .IsolatedTime(c));
  // Unequal vendors (2 + 1): reduce to the leaders, all-reduce of the leaders, broadcast.
  const Cluster odd = Mixed({Node("x", "vx", 2), Node("y", "vy", 1)});
  auto lead = collectives::VendorHierarchicalPlan(CollectiveOp::kAllReduce, {0, 1, 2}, S, odd, tuning);
  ASSERT_TRUE(lead.has_value());
  const double chain = 2 * kFabricLat + S / kFabricBw;                         // 0 -> 1, then 1 -> 0
  const double leaders = 2 * (4 * kPcieLat + 2 * kNicLat) + 2 * (S / 2) / kNicBw;  // ring of two
  EXPECT_NEAR(lead->IsolatedTime(odd), 2 * chain + leaders, (2 * chain + leaders) * 1e-12);
}

// A planning context over a cluster, scoring plans by simulating 1F1B with the ring.
struct Planning {
  ModelGraph model = testing::Gpt(6);
  Cluster cluster;
  testing::SpeedDeviceModel dm;
  TrainSettings train;
  ParallelSettings parallel;
  collectives::Ring ring{collectives::CommTuning{}};
  std::unique_ptr<PlanningContext> ctx;
  int simulations = 0;

  Planning(Cluster c, std::map<std::string, double> speed, std::int64_t global_batch)
      : cluster(std::move(c)), dm(1e-3, std::move(speed)) {
    train.global_batch = global_batch;
    train.micro_batch = 1;
    ctx = std::make_unique<PlanningContext>(PlanningContext{model, cluster, train, parallel, dm, 0, {}});
    ctx->evaluate = [this](const Plan& plan) { return Evaluate(plan); };
  }
  absl::StatusOr<MetricSet> Evaluate(const Plan& plan) {
    ++simulations;
    SchedulingContext sc{model, cluster, plan, train, dm};
    auto s = ExpandPipeline(sc, ProgramSource([&plan](int m) -> absl::StatusOr<PipelineProgram> {
                              return OneFOneBProgram(plan.pp(), m);
                            }),
                            ExpandOptions{});
    if (!s.ok()) return s.status();
    auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
    if (!r.ok()) return r.status();
    MetricSet m;
    m.Add("iteration_time_s", r->iteration_time_s, "s");
    m.Add("throughput_samples_per_s", static_cast<double>(train.global_batch) / r->iteration_time_s, "samples/s");
    return m;
  }
};

TEST(H2HeteroPp, ATwoTypePipelineSplitsByChipSpeedAndGivesTheClosedForm) {
  // A chip twice as fast as B; one stage each (tp 1, dp 1), 6 blocks: A takes 4, B 2, so both
  // stages take 8 layer-passes of 1 ms forward per micro-batch (A: 8 layers at 0.5 ms; B: 4 at
  // 1 ms), t = 4 ms forward + 8 ms backward. Links a million times faster than the usual ones
  // make the transfers negligible, so 1F1B over m micro-batches takes (m + 1) x t.
  constexpr double kScale = 1e6;
  Planning su(Mixed({Node("a", "va", 1, 80, kScale), Node("b", "vb", 1, 80, kScale)}), {{"a", 2.0}, {"b", 1.0}}, 8);
  auto model = CostModel::Make(*su.ctx, ChipTypes(su.cluster));
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<StageGroup> groups = {{0, 1, 1, 1}, {1, 1, 1, 1}};
  auto split = SplitUnits(*model, groups);
  ASSERT_TRUE(split.ok() && split->has_value());
  EXPECT_EQ(**split, (std::vector<int>{5, 3}));  // embedding + 4 blocks | 2 blocks + head
  HeteroPp pp(HeteroPpSettings{{"a", "b"}, {1, 1}, {1, 1}, {1, 1}, {}});
  auto plan = pp.Partition(*su.ctx);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->pp(), 2);
  EXPECT_EQ(plan->stages[0].device_type, "a");
  EXPECT_EQ(plan->stages[1].device_type, "b");
  const double t = 4e-3 + 8e-3, m = 8;
  const double want = (m + 1) * t;
  auto sim = su.Evaluate(*plan);
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_NEAR(sim->Find("iteration_time_s")->value, want, want * 1e-6);
  EXPECT_NEAR(sim->Find("throughput_samples_per_s")->value, m / want, m / want * 1e-6);
  // The cost model's estimate is the same closed form.
  auto e = model->Evaluate(Layout{groups, **split});
  ASSERT_TRUE(e.ok());
  EXPECT_NEAR(e->iteration_s, want, want * 1e-6);
  // An even split by count (4 units each) makes A wait for B: A's 3 blocks take 9 ms per
  // micro-batch, B's 18 ms, so 9 + 18 + (m - 1) x 18 ms, in the simulator and the estimate.
  const Layout even{groups, {4, 4}};
  const double want_even = 9e-3 + 18e-3 + (m - 1) * 18e-3;
  auto even_plan = BuildPlan(*model, even);
  ASSERT_TRUE(even_plan.ok()) << even_plan.status();
  auto even_sim = su.Evaluate(*even_plan);
  ASSERT_TRUE(even_sim.ok());
  EXPECT_NEAR(even_sim->Find("iteration_time_s")->value, want_even, want_even * 1e-6);
  auto even_e = model->Evaluate(even);
  ASSERT_TRUE(even_e.ok());
  EXPECT_NEAR(even_e->iteration_s, want_even, want_even * 1e-6);
}

// Every layout of HeteroAuto's space (every grouping, every split of the units), simulated.
double ExhaustiveBest(Planning& su, int& layouts) {
  auto model = CostModel::Make(*su.ctx, ChipTypes(su.cluster));
  EXPECT_TRUE(model.ok());
  double best = 1e300;
  layouts = 0;
  ForEachGrouping(*model, true, [&](const std::vector<StageGroup>& groups) {
    Layout layout{groups, {}};
    const int p = layout.num_stages(), n = model->num_units();
    std::vector<int> cuts(static_cast<size_t>(p - 1));
    for (int i = 0; i < p - 1; ++i) cuts[static_cast<size_t>(i)] = i + 1;
    while (true) {
      layout.units.clear();
      int prev = 0;
      for (int c : cuts) {
        layout.units.push_back(c - prev);
        prev = c;
      }
      layout.units.push_back(n - prev);
      auto plan = BuildPlan(*model, layout);
      EXPECT_TRUE(plan.ok()) << plan.status();
      auto m = su.Evaluate(*plan);
      EXPECT_TRUE(m.ok()) << m.status();
      best = std::min(best, m->Find("iteration_time_s")->value);
      ++layouts;
      // Next combination of p - 1 cuts out of 1..n-1.
      int i = p - 2;
      while (i >= 0 && cuts[static_cast<size_t>(i)] == n - (p - 1 - i)) --i;
      if (i < 0) break;
      ++cuts[static_cast<size_t>(i)];
      for (int j = i + 1; j < p - 1; ++j) cuts[static_cast<size_t>(j)] = cuts[static_cast<size_t>(j - 1)] + 1;
    }
  });
  return best;
}

void CompareWithExhaustive(Planning& su, const char* name, double bound) {
  int layouts = 0;
  const double best = ExhaustiveBest(su, layouts);
  su.simulations = 0;
  HeteroAuto h2(SearchOptions{4, true});
  auto plan = h2.Partition(*su.ctx);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int simulated = su.simulations;
  auto m = su.Evaluate(*plan);
  ASSERT_TRUE(m.ok());
  const double got = m->Find("iteration_time_s")->value;
  const double gap = got / best - 1;
  std::printf("[ %s ] HeteroAuto %.6f s against the exhaustive optimum %.6f s over %d layouts: gap %.2f%%, %d "
              "simulations\n",
              name, got, best, layouts, 100 * gap, simulated);
  ::testing::Test::RecordProperty(absl::StrCat(name, "_gap_percent"), absl::StrCat(100 * gap));
  EXPECT_GE(gap, -1e-9) << "nothing beats the exhaustive optimum";
  EXPECT_LE(gap, bound);
  EXPECT_LE(simulated, 4);
}

TEST(H2HeteroAuto, TwoChipTypesAgainstExhaustiveSearch) {
  // 4 fast chips (one node) and 4 chips half as fast (another vendor's node), 8 micro-batches.
  Planning su(Mixed({Node("a", "va", 4), Node("b", "vb", 4)}), {{"a", 2.0}, {"b", 1.0}}, 8);
  CompareWithExhaustive(su, "two_types", 0.05);
}

TEST(H2HeteroAuto, ThreeChipTypesAgainstExhaustiveSearch) {
  Planning su(Mixed({Node("a", "va", 2), Node("b", "vb", 2), Node("c", "vc", 2)}), {{"a", 3.0}, {"b", 2.0}, {"c", 1.0}},
           8);
  CompareWithExhaustive(su, "three_types", 0.05);
}

std::string PartitionError(Planning& su, HeteroPpSettings s) {
  HeteroPp pp(std::move(s));
  auto plan = pp.Partition(*su.ctx);
  EXPECT_FALSE(plan.ok());
  return std::string(plan.status().message());
}

TEST(H2HeteroPp, BadLayoutsAreNamed) {
  Planning su(Mixed({Node("a", "va", 2), Node("b", "vb", 2, 0.05)}), {{"a", 2.0}, {"b", 1.0}}, 8);
  EXPECT_NE(PartitionError(su, {{"a", "z"}, {}, {}, {}, {}})
                .find("chip type 'z' is not in cluster 'mixed' (its chip types: a, b)"),
            std::string::npos);
  EXPECT_NE(PartitionError(su, {{"a", "b"}, {1, 1}, {1, 1}, {1, 1}, {}})
                .find("chip type 'a': the stage groups use 1 chips (stages x tp x dp) but cluster 'mixed' has 2"),
            std::string::npos);
  EXPECT_NE(PartitionError(su, {{"a", "b"}, {}, {1}, {}, {}}).find("'tp' has 1 entries; 'order' names 2 chip types"),
            std::string::npos);
  // 51 MiB chips of type b cannot hold 4 blocks of weights and optimizer state.
  const std::string mem = PartitionError(su, {{"a", "b"}, {1, 1}, {2, 2}, {1, 1}, {2, 6}});
  EXPECT_NE(mem.find("stage 1 (b, tp 2, dp 1, 6 units) needs"), std::string::npos) << mem;
  EXPECT_NE(mem.find("its chip has 0.05 GiB"), std::string::npos) << mem;
  // HeteroPP's own split gives them the head alone, which fits.
  HeteroPp own(HeteroPpSettings{{"a", "b"}, {1, 1}, {2, 2}, {1, 1}, {}});
  auto plan = own.Partition(*su.ctx);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->stages[1].chunks[0].end_layer - plan->stages[1].chunks[0].first_layer, 1);
  // Without a global batch the groups cannot share the micro-batches out.
  su.train.global_batch = 0;
  EXPECT_NE(PartitionError(su, {}).find("[train] global_batch (0) must be a positive multiple"), std::string::npos);
}

TEST(H2HeteroPp, WhenNoSplitFitsTheShortestStageIsNamed) {
  // 1 MiB chips of type b hold not even the head's copy of the tied embedding.
  Planning su(Mixed({Node("a", "va", 2), Node("b", "vb", 2, 0.001)}), {{"a", 2.0}, {"b", 1.0}}, 8);
  const std::string none = PartitionError(su, {{"a", "b"}, {1, 1}, {2, 2}, {1, 1}, {}});
  EXPECT_NE(none.find("no split of the layers"), std::string::npos) << none;
  EXPECT_NE(none.find("(b, tp 2"), std::string::npos) << none;
}

}  // namespace
}  // namespace testbed::h2
