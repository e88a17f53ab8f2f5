// Whole simulator runs with the built h2 plugin on a two-vendor cluster from the presets (one
// H800 node and one Ascend 910B node): HeteroAuto plans stages on both chip types and is
// scored by the simulator; staging cross-vendor transfers through host memory is slower than
// DiComm's device-direct path; and the configuration refuses a chip with no preset and an
// unknown cross-vendor path by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiment_runs.h"
#include "sim/sim_backend.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::MetricOf;

class H2Runs : public testing::ExperimentRuns {
 protected:
  std::vector<absl::StatusOr<RunOutput>> Sim(const std::string& cluster, const std::string& arms) {
    const std::string text = R"(
[experiment]
name = "h2"
backend = "sim"
timeline = "off"
)" + cluster + R"(
[model]
name = "gpt-small"
family = "gpt"
layers = 8
hidden = 2048
heads = 16
seq_len = 1024
vocab = 51200
[train]
global_batch = 16
micro_batch = 1
)" + arms;
    SimBackend backend;
    return RunAll(text, backend);
  }
};

constexpr const char* kTwoVendors = R"(
[cluster]
name = "two-vendors"
groups = [{ node = "h800-node", nodes = 1 }, { node = "atlas-800t-a2", nodes = 1 }]
)";

TEST_F(H2Runs, HeteroAutoPlansBothChipTypesAndHostStagingIsSlower) {
  auto outs = Sim(kTwoVendors, R"(
[[arm]]
name = "dicomm"
partitioner = "h2.hetero_auto"
[[arm]]
name = "staged"
partitioner = "h2.hetero_auto"
"cluster.cross_vendor" = "host_staged"
"cluster.host_copy_gb_per_s" = 5.0
[[arm]]
name = "hetero_pp"
partitioner = { use = "h2.hetero_pp", order = ["h800", "ascend-910b"], tp = [8, 8], dp = [1, 1] }
)");
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  const RunOutput& direct = *outs[0];
  const RunOutput& staged = *outs[1];
  EXPECT_GT(MetricOf(direct, "h2_groupings"), 1);
  EXPECT_GE(MetricOf(direct, "h2_finalists_simulated"), 1);
  EXPECT_GT(MetricOf(direct, "h2_search_s"), 0);
  EXPECT_GT(MetricOf(direct, "throughput_samples_per_s"), 0);
  EXPECT_GT(MetricOf(staged, "iteration_time_s"), MetricOf(direct, "iteration_time_s"));
  // HeteroPP with one stage of TP 8 per chip type: two stages, the H800 one first.
  EXPECT_EQ(MetricOf(*outs[2], "h2_stages"), 2);
}

TEST_F(H2Runs, AChipWithNoPresetIsNamed) {
  auto outs = Sim(R"(
[cluster]
groups = [{ node = "h800-node", nodes = 1 }, { node = { preset = "atlas-800t-a2", device = "ascend-910c" }, nodes = 1 }]
)",
                  "[[arm]]\nname = \"h2\"\npartitioner = \"h2.hetero_auto\"\n");
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_FALSE(outs[0].ok());
  EXPECT_THAT(std::string(outs[0].status().message()), HasSubstr("ascend-910c"));
}

TEST_F(H2Runs, AnUnknownCrossVendorPathIsNamed) {
  auto outs = Sim(R"(
[cluster]
groups = [{ node = "h800-node", nodes = 1 }, { node = "atlas-800t-a2", nodes = 1 }]
cross_vendor = "pigeon"
)",
                  "[[arm]]\nname = \"h2\"\npartitioner = \"h2.hetero_auto\"\n");
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_FALSE(outs[0].ok());
  EXPECT_THAT(std::string(outs[0].status().message()), HasSubstr("cross_vendor"));
  EXPECT_THAT(std::string(outs[0].status().message()), HasSubstr("host_staged"));
}

}  // namespace
}  // namespace testbed
