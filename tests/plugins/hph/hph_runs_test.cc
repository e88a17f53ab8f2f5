// Whole simulator runs with the built hph plugin on the mixed 32-GPU preset (16 RTX 3090, 16
// RTX 2080 Ti): HPH's plan is simulated with its own schedule, puts the fast GPUs first and
// is no slower than the heterogeneity-blind uniform split of the same depth; bad input named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiment_runs.h"
#include "sim/sim_backend.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::MetricOf;

class HphRuns : public testing::ExperimentRuns {
 protected:
  std::vector<absl::StatusOr<RunOutput>> Sim(const std::string& train, const std::string& arms) {
    const std::string text = R"(
device_model = "roofline"
[experiment]
name = "hph"
backend = "sim"
timeline = "off"
[cluster]
preset = "wnv-mixed-32"
[model]
preset = "bert-large"
)" + train + arms;
    SimBackend backend;
    return RunAll(text, backend);
  }
};

TEST_F(HphRuns, PlansTheMixedClusterAndIsNoSlowerThanTheBlindSplit) {
  auto outs = Sim(R"(
[train]
global_batch = 128
micro_batch = 4
)",
                  R"(
[[arm]]
name = "hph"
partitioner = "hph"
scheduler = "hph"
[[arm]]
name = "blind"
partitioner = { use = "megatron.uniform", search = true }
)");
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_GT(MetricOf(*outs[0], "hph_estimated_iteration_s"), 0);
  EXPECT_GE(MetricOf(*outs[0], "hph_depths_considered"), 2);
  EXPECT_LE(MetricOf(*outs[0], "iteration_time_s"), MetricOf(*outs[1], "iteration_time_s") * 1.0001);
}

TEST_F(HphRuns, WithoutAGlobalBatchItSaysWhatIsMissing) {
  auto outs = Sim(R"(
[train]
micro_batch = 4
micro_batches = 8
)",
                  R"(
[[arm]]
name = "hph"
partitioner = "hph"
)");
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_FALSE(outs[0].ok());
  EXPECT_THAT(std::string(outs[0].status().message()), HasSubstr("hph: [train] global_batch (0) must be positive"));
}

}  // namespace
}  // namespace testbed
