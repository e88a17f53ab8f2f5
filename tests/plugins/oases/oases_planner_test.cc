// Oases' planner against references: the exact chain solver against brute force over every
// per-op degree assignment (random problems and the planner's own problems for small models on
// 8 devices, with and without the memory limit binding); the public planner's objective terms
// on a hand-worked 2-op chain; the ring all-reduce model against its closed form; and the
// runtime's two-segment rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "chain_solver.h"
#include "op_costs.h"
#include "testbed/partitioner.h"
#include "testbed/tp_planner.h"
#include "testbed/model_graph.h"

namespace testbed::oases {
namespace {

using ::testing::HasSubstr;

// Every assignment of choices, the cheapest within the budget (first met on ties), or -1s.
std::vector<int> BruteForce(const ChainProblem& p, double* best_cost) {
  std::vector<int> c(static_cast<size_t>(p.ops), 0), best;
  double best_value = std::numeric_limits<double>::infinity();
  while (true) {
    if (AssignmentMemory(p, c) <= p.budget) {
      const double v = AssignmentCost(p, c);
      if (v < best_value) {
        best_value = v;
        best = c;
      }
    }
    int i = p.ops - 1;
    while (i >= 0 && ++c[static_cast<size_t>(i)] == p.choices) c[static_cast<size_t>(i--)] = 0;
    if (i < 0) break;
  }
  *best_cost = best_value;
  return best;
}

ChainProblem RandomProblem(std::mt19937_64& rng, int ops, int choices) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  ChainProblem p;
  p.ops = ops;
  p.choices = choices;
  p.node.assign(static_cast<size_t>(ops), std::vector<double>(static_cast<size_t>(choices)));
  p.memory = p.node;
  p.edge.assign(static_cast<size_t>(ops - 1), std::vector<double>(static_cast<size_t>(choices * choices)));
  for (auto& row : p.node) for (double& v : row) v = u(rng);
  for (auto& row : p.memory) for (double& v : row) v = u(rng);
  for (auto& row : p.edge) for (double& v : row) v = u(rng) < 0.3 ? 0.0 : u(rng);
  p.budget = std::numeric_limits<double>::infinity();
  return p;
}

TEST(ChainSolver, EqualsBruteForceOnRandomChainsWithAndWithoutABindingBudget) {
  std::mt19937_64 rng(7);
  int binding = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int ops = 1 + trial % 8, choices = 1 + (trial / 8) % 4;
    ChainProblem p = RandomProblem(rng, ops, choices);
    double free_cost = 0;
    const std::vector<int> free_best = BruteForce(p, &free_cost);
    // Unbounded, then a budget between the least memory and the free optimum's.
    double least = 0;
    for (const auto& row : p.memory) least += *std::min_element(row.begin(), row.end());
    const double free_memory = AssignmentMemory(p, free_best);
    for (double budget : {std::numeric_limits<double>::infinity(), least + 0.5 * (free_memory - least) + 1e-9}) {
      p.budget = budget;
      double want = 0;
      const std::vector<int> best = BruteForce(p, &want);
      auto got = SolveChain(p);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_DOUBLE_EQ(got->cost, want) << "trial " << trial;
      EXPECT_DOUBLE_EQ(AssignmentCost(p, got->choice), got->cost);
      EXPECT_LE(got->memory, budget);
      if (want > free_cost) ++binding;
    }
  }
  EXPECT_GT(binding, 20);  // the budget really bound in many trials
}

TEST(ChainSolver, RefusesABudgetNoAssignmentMeets) {
  std::mt19937_64 rng(3);
  ChainProblem p = RandomProblem(rng, 4, 3);
  p.budget = 0.01;
  auto got = SolveChain(p);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(got.status().message(), HasSubstr("least memory"));
}

TEST(OasesObjective, TermsOfTheHandWorkedTwoOpChain) {
  OpCosts c;
  c.ops = {1, 2};
  c.degrees = {2, 4};
  c.fwd = {{3, 2}, {5, 4}};
  c.bwd = {{6, 4}, {10, 8}};
  c.comm = {{1, 3}, {2, 6}};
  c.memory = {{10, 5}, {20, 10}};
  c.runtime_memory = {7, 3};
  c.budget = 100;
  const ChainProblem p = BuildProblem(c, true);
  // Op 0: forward + backward alone. The last op: op 0's (the public code's [-1] of a list of
  // n - 1) max(compute, comm) terms, and its own all-reduce forward and backward.
  EXPECT_DOUBLE_EQ(p.node[0][0], 3 + 6);
  EXPECT_DOUBLE_EQ(p.node[1][0], std::max(3.0, 1.0) + 2 + std::max(6.0 + 3, 1.0) + 2);
  EXPECT_DOUBLE_EQ(p.node[1][1], std::max(2.0, 3.0) + 6 + std::max(4.0 + 2, 3.0) + 6);
  // Edge 2 -> 4: (4/2) x comm of op 0 at 2 + min(that comm, forward of op 1 at 4).
  EXPECT_DOUBLE_EQ(p.edge[0][0 * 2 + 1], 2 * 1 + std::min(1.0, 4.0));
  // Edge 4 -> 2: (4/2) x comm of op 1 at 2 + min(comm of op 0 at 4, backward of op 1 at 2).
  EXPECT_DOUBLE_EQ(p.edge[0][1 * 2 + 0], 2 * 2 + std::min(3.0, 10.0));
  EXPECT_DOUBLE_EQ(p.edge[0][0], 0);
  EXPECT_DOUBLE_EQ(p.memory[1][1], 10 + 3);  // the runtime memory counts with the last op
  const ChainProblem alpa = BuildProblem(c, false);
  EXPECT_DOUBLE_EQ(alpa.node[1][0], 5 + 2 + 10 + 5 + 2);
  EXPECT_DOUBLE_EQ(alpa.edge[0][0 * 2 + 1], 2 * 1);
}

// Compute time from the layer's FLOPs split over the degree at a flat 20 TFLOP/s, with a
// fixed cost per kernel so that small shares are less efficient.
class FlopsModel final : public DeviceModel {
 public:
  absl::StatusOr<double> ComputeLayerTime(const LayerWork& w, const DeviceSpec&) const override {
    const double flops = w.phase == Phase::kBackward ? w.layer->bwd_flops_per_sample : w.layer->fwd_flops_per_sample;
    return 20e-6 + flops * static_cast<double>(w.micro_batch) * w.fraction / w.tp / 20e12;
  }
  absl::StatusOr<double> KernelTime(double, double, Precision, const DeviceSpec&) const override { return 0.0; }
};

// Two nodes of four GPUs on PCIe to one switch each (16 GB/s), nodes over 12.5 GB/s.
Cluster EightDevices(double memory_gib) {
  NodeType type;
  type.name = "four";
  type.devices = 4;
  type.device.name = "gpu";
  type.device.peak_flops[Precision::kFp16] = 71e12;
  type.device.memory_bytes = static_cast<std::int64_t>(memory_gib * 1073741824.0);
  type.device.memory_bandwidth_bytes_per_s = 936e9;
  type.hubs = {"cpu0"};
  const LinkSpec pcie{"pcie", LinkKind::kPcie, 16e9, 1e-6};
  for (int i = 0; i < 4; ++i) type.links.push_back({"gpu" + std::to_string(i), "cpu0", pcie});
  type.nics = {"nic0"};
  type.links.push_back({"nic0", "cpu0", pcie});
  type.nic_link = LinkSpec{"ib", LinkKind::kInfiniband, 12.5e9, 2e-6};
  return *Cluster::Build("eight", {NodeGroup{type, 2}});
}

TEST(OasesPlanner, EqualsBruteForceOnSmallModelsOnEightDevicesWithAndWithoutTheMemoryLimit) {
  FlopsModel dm;
  TrainSettings train;
  ParallelSettings parallel;
  int binding = 0, mixed = 0;
  for (int layers : {1, 2, 4}) {
    for (std::int64_t hidden : {1024, 4096}) {
      ModelShape shape;
      shape.name = "small";
      shape.layers = layers;
      shape.hidden = hidden;
      shape.heads = hidden / 64;
      shape.seq_len = 1024;
      shape.vocab = 50257;
      auto model = BuildModelGraph(shape);
      ASSERT_TRUE(model.ok());
      GridSpec g;
      g.dp = 8;
      g.micro_batch = 1;
      g.chunks = UniformStages(static_cast<int>(model->layers.size()), 1);
      const Plan plan = GridPlan(g);
      for (double gib : {1000.0, 0.0}) {
        // 0: a budget a little above the least memory any assignment needs (binding).
        Cluster cluster = EightDevices(gib > 0 ? gib : 1000.0);
        PlanningContext ctx{*model, cluster, train, parallel, dm, 0, {}};
        for (bool overlap : {true, false}) {
          auto costs = MeasureOps(ctx, plan, CostSettings{overlap, 0.95});
          ASSERT_TRUE(costs.ok()) << costs.status();
          EXPECT_EQ(costs->degrees, (std::vector<int>{2, 4, 8}));  // degree 1 leaves 1 sample per group
          ChainProblem p = BuildProblem(*costs, overlap);
          if (gib == 0) {
            double least = 0, most = 0;
            for (const auto& row : p.memory) {
              least += *std::min_element(row.begin(), row.end());
              most += *std::max_element(row.begin(), row.end());
            }
            p.budget = least + 0.3 * (most - least);
          }
          double want = 0;
          BruteForce(p, &want);
          auto got = SolveChain(p);
          ASSERT_TRUE(got.ok()) << got.status();
          EXPECT_DOUBLE_EQ(got->cost, want) << layers << " layers, hidden " << hidden;
          ChainProblem free = p;
          free.budget = std::numeric_limits<double>::infinity();
          double unconstrained = 0;
          BruteForce(free, &unconstrained);
          if (want > unconstrained) ++binding;
          for (size_t i = 1; i < got->choice.size(); ++i) mixed += got->choice[i] != got->choice[0] ? 1 : 0;
        }
      }
    }
  }
  EXPECT_GT(binding, 0);
  EXPECT_GT(mixed, 0);  // some optimum mixes degrees
}

TEST(OasesPlanner, RingAllReduceMatchesItsClosedForm) {
  const Cluster c = EightDevices(24);
  const Cluster* cluster = &c;
  // Two GPUs of one node: the ring's hops cross their PCIe links; 2 (n - 1) steps of S / n.
  const std::vector<DeviceId> pair = {0, 1};
  const double bytes = 64e6;
  double bw = std::numeric_limits<double>::infinity(), lat = 0;
  for (LinkId l : cluster->Route(0, 1)) {
    bw = std::min(bw, cluster->links()[static_cast<size_t>(l)].spec.bandwidth_bytes_per_s);
    lat += cluster->links()[static_cast<size_t>(l)].spec.latency_s;
  }
  double lat_back = 0;
  for (LinkId l : cluster->Route(1, 0)) lat_back += cluster->links()[static_cast<size_t>(l)].spec.latency_s;
  EXPECT_NEAR(RingAllReduceSeconds(*cluster, pair, bytes), 2.0 * (bytes / 2 / bw + std::max(lat, lat_back)), 1e-12);
  EXPECT_EQ(RingAllReduceSeconds(*cluster, {3}, bytes), 0.0);
}

TEST(TpPlannerCore, ADegreeThatDoesNotDivideHeadsOrHiddenIsNamed) {
  Layer attention;
  attention.name = "block2.attention";
  attention.kind = LayerKind::kAttention;
  attention.hidden = 768;
  attention.heads = 12;
  EXPECT_TRUE(CheckLayerDegree(attention, 4).ok());
  EXPECT_THAT(CheckLayerDegree(attention, 8).message(),
              HasSubstr("layer 'block2.attention': tensor-parallel degree 8 does not divide its 12 attention heads"));
  Layer mlp = attention;
  mlp.name = "block2.mlp";
  mlp.kind = LayerKind::kMlp;
  mlp.heads = 0;
  mlp.hidden = 1000;
  mlp.ffn_hidden = 4000;
  EXPECT_THAT(CheckLayerDegree(mlp, 16).message(), HasSubstr("does not divide its 1000 hidden units"));
  EXPECT_THAT(CheckLayerDegree(mlp, 0).message(), HasSubstr("not a positive number"));
}

TEST(OasesPlanner, RuntimeKeepsTwoSegmentsTheLowerDegreeFirst) {
  EXPECT_EQ(TwoSegments({4, 4, 4, 4}), (std::vector<int>{4, 4, 4, 4}));
  // Degrees 8 (3 ops) and 2 (4 ops), one 4: 2 on the first 4 / 2 = 2 layers, 8 on the rest.
  EXPECT_EQ(TwoSegments({8, 2, 8, 2, 4, 2, 8, 2}), (std::vector<int>{2, 2, 2, 2, 8, 8, 8, 8}));
  // The lower degree met once: no whole layer of it, all at the higher.
  EXPECT_EQ(TwoSegments({4, 4, 4, 2}), (std::vector<int>{4, 4, 4, 4}));
  // Equal counts: the two first met.
  EXPECT_EQ(TwoSegments({4, 4, 2, 2, 8, 8}), (std::vector<int>{2, 2, 4, 4, 4, 4}));
}

}  // namespace
}  // namespace testbed::oases
