// Whole simulator runs with the built hsdp plugin: on one HPNV node with two pipeline stages
// of two replicas (each data-parallel group a pair bridged by NVLink), the planner splits the
// layers between NVLink and PCIe, the simulated iteration is no slower than ZeRO-3 on the
// NVLink routes alone and the PCIe links work beside NVLink; and bad settings are refused by
// name (no sharding, a class without a route, classes that meet on a link). For real, with
// the split the planner writes (some layers in two pieces, each gathered and reduce-scattered
// on its class's streams), training equals single-process training and ZeRO-3's losses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>

#include "exec/real_backend.h"
#include "experiment_runs.h"
#include "sim/sim_backend.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ColumnOf;
using testing::MetricOf;

class HsdpRuns : public testing::ExperimentRuns {
 protected:
  void SetUp() override {
    ExperimentRuns::SetUp();
    ASSERT_NE(registry_.Find(ComponentKind::kShardPlanner, "hsdp"), nullptr);
  }
  std::vector<absl::StatusOr<RunOutput>> Sim(const std::string& parallel, const std::string& arms,
                                             const std::string& cluster = "hpnv", int nodes = 1) {
    const std::string text = std::string(R"(
[experiment]
name = "hsdp"
backend = "sim"
[cluster]
nodes = )") + std::to_string(nodes) + R"(
preset = ")" + cluster + R"("
[model]
name = "gpt-small"
family = "gpt"
layers = 4
hidden = 2048
heads = 16
seq_len = 512
vocab = 50257
[train]
global_batch = 4
micro_batch = 1
)" + parallel + arms;
    SimBackend backend;
    return RunAll(text, backend);
  }
};

constexpr const char* kPairs = R"(
[parallel]
pp = 2
zero_stage = 3
)";

TEST_F(HsdpRuns, SplitsBetweenNvlinkAndPcieAndIsNoSlower) {
  auto outs = Sim(kPairs, R"(
[[arm]]
name = "sdp"
[[arm]]
name = "hsdp"
shard_planner = { use = "hsdp", classes = ["nvlink", "pcie+cpu"] }
)");
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  ASSERT_TRUE(outs[1].ok()) << outs[1].status();
  const RunOutput& sdp = *outs[0];
  const RunOutput& hsdp = *outs[1];
  EXPECT_GT(MetricOf(hsdp, "hsdp_layers_split"), 0);
  EXPECT_EQ(MetricOf(hsdp, "hsdp_solver_optimal"), 1);
  EXPECT_GE(MetricOf(hsdp, "hsdp_predicted_speedup"), 1.0);
  EXPECT_LE(MetricOf(hsdp, "iteration_time_s"), MetricOf(sdp, "iteration_time_s"));
  // The PCIe links carry the pieces beside NVLink; NVLink carries less.
  EXPECT_GT(MetricOf(hsdp, "link_busy_pcie_s"), MetricOf(sdp, "link_busy_pcie_s"));
  EXPECT_LT(MetricOf(hsdp, "link_busy_nvlink_s"), MetricOf(sdp, "link_busy_nvlink_s"));
  // Shares per layer, one column per class, each row summing to 1.
  const auto nv = ColumnOf<double>(hsdp, "hsdp_split", "share_0");
  const auto pcie = ColumnOf<double>(hsdp, "hsdp_split", "share_1");
  ASSERT_EQ(nv.size(), pcie.size());
  ASSERT_FALSE(nv.empty());
  for (size_t l = 0; l < nv.size(); ++l) EXPECT_DOUBLE_EQ(nv[l] + pcie[l], 1.0) << "layer " << l;
}

// Inside one DGX A100 node (NVSwitch, a NIC per GPU): NVLink and the NICs at once, the
// in-node pieces leaving through each GPU's NIC and back through the switch. Short sequences,
// so that the gathers are not hidden behind the compute; 32 chunks per layer, as the NICs
// (25 GB/s) take less than an eighth beside NVSwitch (300 GB/s).
TEST_F(HsdpRuns, SplitsBetweenNvlinkAndTheNicsInsideANode) {
  auto outs = Sim("[parallel]\nzero_stage = 3\n", R"(
[[arm]]
name = "sdp"
train = { global_batch = 8 }
model = { seq_len = 32 }
[[arm]]
name = "hsdp"
train = { global_batch = 8 }
model = { seq_len = 32 }
shard_planner = { use = "hsdp", classes = ["any", "via-nic"], chunks = 32 }
)", "dgx-a100");
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  ASSERT_TRUE(outs[1].ok()) << outs[1].status();
  EXPECT_GT(MetricOf(*outs[1], "hsdp_layers_split"), 0);
  EXPECT_LE(MetricOf(*outs[1], "iteration_time_s"), MetricOf(*outs[0], "iteration_time_s"));
  // ZeRO-3 alone crosses no InfiniBand link, so it reports no busy time for the kind.
  EXPECT_EQ(outs[0]->metrics.Find("link_busy_infiniband_s"), nullptr);
  EXPECT_GT(MetricOf(*outs[1], "link_busy_infiniband_s"), 0);
}

TEST_F(HsdpRuns, AcrossNodesTheSecondNicRailCarriesPiecesBesideTheFirst) {
  // One data-parallel group of 16 over two DGX A100 nodes: its ring leaves each node through
  // one GPU's NIC. Class nic1 leaves through that GPU's neighbour's NIC instead; the two
  // classes meet on NVSwitch and on the GPU's PCIe link, so the planner refuses them unless
  // told to add their loads there. One ring in rank order first.
  auto outs = Sim("[parallel]\nzero_stage = 3\n", R"(
[[arm]]
name = "sdp"
train = { global_batch = 16 }
model = { seq_len = 32 }
collective = "ring"
[[arm]]
name = "hsdp"
train = { global_batch = 16 }
model = { seq_len = 32 }
collective = "ring"
shard_planner = { use = "hsdp", classes = ["any", "nic1"], shared_links = "add", chunks = 16 }
[[arm]]
name = "refused"
train = { global_batch = 16 }
model = { seq_len = 32 }
collective = "ring"
shard_planner = { use = "hsdp", classes = ["any", "nic1"] }
[[arm]]
name = "channels"
train = { global_batch = 16 }
model = { seq_len = 32 }
collective = { use = "ring", ring_channels = 0 }
shard_planner = { use = "hsdp", classes = ["any", "nic1"], shared_links = "add", chunks = 16 }
[[arm]]
name = "channels-ringcost"
train = { global_batch = 16 }
model = { seq_len = 32 }
collective = { use = "ring", ring_channels = 0 }
shard_planner = { use = "hsdp", classes = ["any", "nic1"], shared_links = "add", chunks = 16, cost_collective = "ring" }
)", "dgx-a100", 2);
  ASSERT_EQ(outs.size(), 5u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  ASSERT_TRUE(outs[1].ok()) << outs[1].status();
  ASSERT_FALSE(outs[2].ok());
  EXPECT_THAT(outs[2].status().message(), HasSubstr("shared_links"));
  const double sdp = MetricOf(*outs[0], "iteration_time_s"), hsdp = MetricOf(*outs[1], "iteration_time_s");
  std::printf("sdp %.6g s, hsdp %.6g s (%.3fx; predicted %.3fx), layers split %g\n", sdp, hsdp, sdp / hsdp,
              MetricOf(*outs[1], "hsdp_predicted_speedup"), MetricOf(*outs[1], "hsdp_layers_split"));
  EXPECT_GT(MetricOf(*outs[1], "hsdp_layers_split"), 0);
  EXPECT_GT(MetricOf(*outs[1], "hsdp_predicted_speedup"), 1.05);
  EXPECT_LT(hsdp, sdp / 1.05);
  // Both rails carried bytes: the busiest InfiniBand link carries less than the single ring's.
  EXPECT_LT(MetricOf(*outs[1], "link_busy_infiniband_s"), MetricOf(*outs[0], "link_busy_infiniband_s"));
  // With a channel per member both classes leave through every NIC: priced as the run's
  // collective model plans them, nothing is gained and no layer is split; priced as one ring
  // (the planner's own model), the split is the one-ring run's.
  ASSERT_TRUE(outs[3].ok()) << outs[3].status();
  ASSERT_TRUE(outs[4].ok()) << outs[4].status();
  EXPECT_EQ(MetricOf(*outs[3], "hsdp_layers_split"), 0);
  EXPECT_DOUBLE_EQ(MetricOf(*outs[3], "hsdp_predicted_speedup"), 1.0);
  EXPECT_EQ(MetricOf(*outs[4], "hsdp_layers_split"), MetricOf(*outs[1], "hsdp_layers_split"));
  EXPECT_DOUBLE_EQ(MetricOf(*outs[4], "hsdp_predicted_speedup"), MetricOf(*outs[1], "hsdp_predicted_speedup"));
}

TEST_F(HsdpRuns, ASplitTrainsForRealLikeASingleProcess) {
  // Real runs plan on the ranks' own cluster (one node joined through memory), where every
  // class meets every other: the even split (no search) puts half of every layer's weights on
  // each class's streams. Two stages of two replicas; an odd hidden size so that the pieces
  // and the shards within them are uneven.
  const std::string text = R"(
communicator = "local"
[experiment]
name = "hsdp-real"
backend = "real"
timeline = "off"
[real]
predict = false
[data]
dataset = "digits"
[model]
name = "mlp"
family = "mlp"
layers = 4
hidden = 37
inputs = 64
vocab = 10
[train]
global_batch = 16
micro_batch = 4
steps = 5
optimizer = "adam"
learning_rate = 0.01
precision = "fp32"
[parallel]
pp = 2
dp = 2
zero_stage = 3
[[arm]]
name = "sdp"
[[arm]]
name = "hsdp"
shard_planner = { use = "hsdp", classes = ["any", "other"], split = "even", chunks = 3 }
)";
  RealBackend backend;
  auto outs = RunAll(text, backend);
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  ASSERT_TRUE(outs[1].ok()) << outs[1].status();
  const RunOutput& hsdp = *outs[1];
  EXPECT_GT(MetricOf(hsdp, "hsdp_layers_split"), 0);
  const auto first = ColumnOf<double>(hsdp, "hsdp_split", "share_0");
  ASSERT_FALSE(first.empty());
  EXPECT_NEAR(first.front(), 2.0 / 3, 1e-12);  // 3 chunks: two on the first class, one on the second
  EXPECT_LT(MetricOf(hsdp, "max_loss_diff_vs_single"), 1e-6);
  EXPECT_LT(MetricOf(hsdp, "max_grad_norm_rel_diff_vs_single"), 1e-5);
  const std::vector<double> sdp = ColumnOf<double>(*outs[0], "loss_curve", "loss");
  const std::vector<double> split = ColumnOf<double>(hsdp, "loss_curve", "loss");
  ASSERT_EQ(split.size(), sdp.size());
  for (size_t t = 0; t < split.size(); ++t) EXPECT_NEAR(split[t], sdp[t], 1e-6) << "step " << t;
  EXPECT_LT(split.back(), split.front());  // it learns
}

TEST_F(HsdpRuns, BadSettingsAreRefusedByName) {
  struct Case {
    const char* parallel;
    const char* planner;
    const char* message;
  };
  const Case cases[] = {
      {"[parallel]\npp = 2\n", "\"hsdp\"", "zero_stage = 3"},
      // All four devices in one group: no NVLink route between the pairs.
      {"[parallel]\nzero_stage = 3\n", R"({ use = "hsdp", classes = ["nvlink", "pcie+cpu"] })",
       "link class 'nvlink': no route from device"},
      // The cluster's own routes and PCIe meet between the pairs.
      {"[parallel]\nzero_stage = 3\n", R"({ use = "hsdp", classes = ["any", "pcie+cpu"] })", "independent links"},
      {kPairs, R"({ use = "hsdp", classes = ["nvlink", "pci"] })", "unknown link kind 'pci'"},
      {kPairs, R"({ use = "hsdp", shared_links = "maybe" })", "shared_links"},
      // Every device of the HPNV node has one NIC: no rail 1.
      {kPairs, R"({ use = "hsdp", classes = ["any", "via-nic+nic1"] })", "NIC of rail 1"},
  };
  for (const Case& c : cases) {
    auto outs = Sim(c.parallel, std::string("[[arm]]\nname = \"hsdp\"\nshard_planner = ") + c.planner + "\n");
    ASSERT_EQ(outs.size(), 1u);
    ASSERT_FALSE(outs[0].ok()) << c.planner;
    EXPECT_THAT(outs[0].status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace testbed
