// Whole runs with the built plugins. Simulated, on the Oases paper's PCIe-only 32-GPU cluster:
// every arm of the experiment runs (half a sample per GPU per micro-batch, as the experiment); Oases plans at most two segments and beats Megatron-LM's
// uniform degree; its planning time is reported. Bad input: a degree that does not divide the
// heads and a memory limit no assignment meets are refused naming the op. For real, on four
// ranks (threads), the tiny GPT at TP 2 and TP 4 under oases.overlap (sub-batches, no
// recomputation all-reduce, cross-pass recomputation) trains as single-process training does,
// its all-reduces overlap compute, and it sends fewer tensor-parallel bytes than
// Megatron-style recomputation on the same ranks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/real_backend.h"
#include "experiment_runs.h"
#include "sim/sim_backend.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ColumnOf;
using testing::MetricOf;

class OasesRuns : public testing::ExperimentRuns {
 protected:
  std::vector<absl::StatusOr<RunOutput>> Sim(const std::string& arms, std::int64_t hidden = 4096, int layers = 4) {
    const std::string text = R"(
device_model = "calibrated"
[experiment]
name = "oases"
backend = "sim"
timeline = "off"
[cluster]
preset = "oases-pcie-32"
[model]
name = "gpt"
family = "gpt"
layers = )" + std::to_string(layers) + "\nhidden = " + std::to_string(hidden) + "\nheads = " + std::to_string(hidden / 64) +
                             R"(
seq_len = 1024
vocab = 50257
[train]
global_batch = 128
micro_batch = 1
[parallel]
tp = 2
recompute = "full"
)" + arms;
    SimBackend backend;
    return RunAll(text, backend);
  }

  std::vector<absl::StatusOr<RunOutput>> Real(const std::string& arms) {
    const std::string text = R"(
communicator = "local"
[experiment]
name = "oases-real"
backend = "real"
[model]
name = "tiny-gpt"
family = "gpt"
layers = 2
hidden = 64
heads = 4
seq_len = 32
vocab = 256
[train]
global_batch = 8
micro_batch = 2
steps = 6
optimizer = "sgd"
learning_rate = 0.1
precision = "fp32"
[data]
dataset = "text"
[parallel]
recompute = "full"
)" + arms;
    RealBackend backend;
    return RunAll(text, backend);
  }
};

constexpr const char* kArms = R"(
[[arm]]
name = "megatron"
tp_planner = "megatron.uniform_tp"
scheduler = { use = "1f1b", recompute_interleaved = true }
[[arm]]
name = "alpa"
tp_planner = "alpa_style"
scheduler = { use = "1f1b", recompute_interleaved = true }
[[arm]]
name = "wang"
tp_planner = "megatron.uniform_tp"
scheduler = { use = "wang.decomposed", recompute_interleaved = true }
[[arm]]
name = "merak"
tp_planner = "megatron.uniform_tp"
scheduler = { use = "merak.shifted_critical_path", tp_chunks = 2, last_stage_recomputes = true }
[[arm]]
name = "oases"
tp_planner = "oases"
scheduler = "oases.overlap"
)";

TEST_F(OasesRuns, EveryArmRunsAndOasesBeatsMegatronOnPcie) {
  const auto outs = Sim(kArms);
  ASSERT_EQ(outs.size(), 5u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  const RunOutput& megatron = *outs[0];
  const RunOutput& oases = *outs[4];
  EXPECT_GT(MetricOf(oases, "throughput_samples_per_s"), MetricOf(megatron, "throughput_samples_per_s"));
  EXPECT_LE(MetricOf(oases, "tp_segments"), 2);
  EXPECT_GT(MetricOf(oases, "tp_planning_s"), 0);
  EXPECT_GT(MetricOf(oases, "tp_degree_min"), 1);  // degree 1 leaves one sample per group
  const auto ops = ColumnOf<std::string>(oases, "tp_plan", "op");
  EXPECT_EQ(ops.size(), 8u);
  // Every arm reached the same global batch.
  for (const auto& o : outs) {
    EXPECT_DOUBLE_EQ(MetricOf(*o, "micro_batch") * MetricOf(*o, "micro_batches") * 32 / MetricOf(*o, "tp"), 128);
  }
}

TEST_F(OasesRuns, RefusesADegreeThatDoesNotDivideTheHeads) {
  const auto outs = Sim("[[arm]]\nname = \"three\"\ntp_planner = { use = \"megatron.uniform_tp\", degree = 3 }\n", 2048, 1);
  ASSERT_FALSE(outs[0].ok());
  EXPECT_THAT(outs[0].status().message(), HasSubstr("layer 'embedding': tensor-parallel degree 3 does not divide its 2048 hidden units"));
}

TEST_F(OasesRuns, RefusesAMemoryLimitNoAssignmentMeetsNamingTheOp) {
  const auto outs = Sim("[[arm]]\nname = \"tight\"\ntp_planner = { use = \"oases\", memory_fraction = 0.05 }\n", 12288, 4);
  ASSERT_FALSE(outs[0].ok());
  EXPECT_EQ(outs[0].status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(outs[0].status().message(), HasSubstr("no assignment of degrees fits"));
  EXPECT_THAT(outs[0].status().message(), HasSubstr("op 'block"));
  EXPECT_THAT(outs[0].status().message(), HasSubstr("leanest degree"));
}

TEST_F(OasesRuns, OverlapScheduleTrainsAsSingleProcessOnRealRanks) {
  const auto outs = Real(R"(
[[arm]]
name = "oases-tp2"
parallel = { tp = 2, dp = 2, recompute = "full" }
scheduler = "oases.overlap"
"real.max_loss_diff_vs_single" = 1e-4
[[arm]]
name = "oases-tp4"
parallel = { tp = 4, recompute = "full" }
scheduler = "oases.overlap"
"real.max_loss_diff_vs_single" = 1e-4
[[arm]]
name = "megatron-tp4"
parallel = { tp = 4, recompute = "full" }
scheduler = { use = "1f1b", recompute_interleaved = true }
"real.max_loss_diff_vs_single" = 1e-4
)");
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  for (const auto& o : outs) {
    EXPECT_LT(MetricOf(*o, "max_loss_diff_vs_single"), 1e-4);
    EXPECT_LT(MetricOf(*o, "max_grad_norm_rel_diff_vs_single"), 1e-4);
    EXPECT_LT(MetricOf(*o, "final_loss"), MetricOf(*o, "first_loss"));
  }
  EXPECT_GT(MetricOf(*outs[0], "tensor_parallel_overlapped_per_step"), 0);
  EXPECT_GT(MetricOf(*outs[1], "tensor_parallel_overlapped_per_step"), 0);
  // Megatron-style recomputation repeats the forward all-reduces; Oases' does not.
  EXPECT_LT(MetricOf(*outs[1], "tensor_parallel_bytes_per_step"), MetricOf(*outs[2], "tensor_parallel_bytes_per_step"));
}

}  // namespace
}  // namespace testbed
