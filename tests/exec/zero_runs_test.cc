// ZeRO in whole real runs: with zero_stage 1, 2 and 3 the ranks keep parts of each layer's
// parameters, reduce-scatter the gradients into them, step them and all-gather the weights
// (after the step, per bucket under param_gather_overlap, or before each use under ZeRO-3);
// training equals single-process training (the full weights are NaN between a step and their
// gather, so a use the schedule did not gather for would show), with data, tensor and
// pipeline parallelism.
#include <gtest/gtest.h>

#include "exec/real_backend.h"
#include "experiment_runs.h"

namespace testbed {
namespace {

using testing::ColumnOf;
using testing::MetricOf;

class ZeroRuns : public testing::ExperimentRuns {};

constexpr const char* kMlp = R"(
communicator = "local"
[experiment]
name = "zero"
backend = "real"
timeline = "off"
[real]
predict = false
[data]
dataset = "digits"
[model]
name = "mlp"
family = "mlp"
layers = 2
hidden = 33
inputs = 64
vocab = 10
[train]
global_batch = 32
micro_batch = 4
steps = 6
optimizer = "adam"
learning_rate = 0.01
precision = "fp32"
[parallel]
dp = 4
)";

TEST_F(ZeroRuns, EveryStageTrainsLikeASingleProcess) {
  const std::string arms = R"(
[[arm]]
name = "zero0"
[[arm]]
name = "zero1"
parallel = { zero_stage = 1 }
[[arm]]
name = "zero2"
parallel = { zero_stage = 2 }
[[arm]]
name = "zero3"
parallel = { zero_stage = 3 }
[[arm]]
name = "zero1-pp2"
parallel = { zero_stage = 1, dp = 2, pp = 2 }
[[arm]]
name = "zero3-sgd-delayed"
parallel = { zero_stage = 3 }
train = { optimizer = "sgd", learning_rate = 0.1 }
real = { delay = 2, weight_decay = 0.01 }
[[arm]]
name = "zero1-per-bucket"
parallel = { zero_stage = 1 }
scheduler = { use = "1f1b", param_gather_overlap = true, dp_bucket_mib = 0.001 }
[[arm]]
name = "zero2-pp2-per-bucket"
parallel = { zero_stage = 2, dp = 2, pp = 2 }
scheduler = { use = "1f1b", param_gather_overlap = true, dp_bucket_mib = 0.001 }
)";
  RealBackend backend;
  auto outs = RunAll(std::string(kMlp) + arms, backend);
  ASSERT_EQ(outs.size(), 8u);
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& o = outs[i];
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_LT(MetricOf(*o, "max_loss_diff_vs_single"), 1e-6);
    EXPECT_GE(MetricOf(*o, "max_loss_diff_vs_single"), 0.0);
    EXPECT_LT(MetricOf(*o, "max_grad_norm_rel_diff_vs_single"), 1e-5);
    // The gathered model, evaluated (a model split over stages is not).
    if (i != 4 && i != 7) {
      EXPECT_GT(MetricOf(*o, "validation_accuracy"), 0.1) << i;
    }
  }
  // ZeRO-3's trained model, gathered for evaluation, is plain data parallelism's.
  EXPECT_NEAR(MetricOf(*outs[3], "validation_loss"), MetricOf(*outs[0], "validation_loss"), 1e-5);
  // The same losses as plain data parallelism, to rounding (sums in another order).
  const std::vector<double> plain = ColumnOf<double>(*outs[0], "loss_curve", "loss");
  for (size_t i = 1; i < 4; ++i) {
    const std::vector<double> loss = ColumnOf<double>(*outs[i], "loss_curve", "loss");
    ASSERT_EQ(loss.size(), plain.size());
    for (size_t t = 0; t < loss.size(); ++t) EXPECT_NEAR(loss[t], plain[t], 1e-6) << "arm " << i << " step " << t;
  }
  EXPECT_LT(ColumnOf<double>(*outs[3], "loss_curve", "loss").back(), plain.front());  // it learns
}

TEST_F(ZeroRuns, ZeroThreeWithTensorParallelismTrainsLikeASingleProcess) {
  const std::string text = R"(
communicator = "local"
[experiment]
name = "zero-tp"
backend = "real"
timeline = "off"
[real]
predict = false
[data]
dataset = "text"
[model]
name = "tiny"
family = "gpt"
layers = 2
hidden = 32
heads = 4
seq_len = 16
vocab = 256
[train]
global_batch = 8
micro_batch = 2
steps = 4
optimizer = "adam"
learning_rate = 0.003
precision = "fp32"
[parallel]
dp = 2
tp = 2
zero_stage = 3
[[arm]]
name = "tp2-dp2"
)";
  RealBackend backend;
  auto outs = RunAll(text, backend);
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  EXPECT_LT(MetricOf(*outs[0], "max_loss_diff_vs_single"), 1e-6);
  EXPECT_LT(MetricOf(*outs[0], "max_grad_norm_rel_diff_vs_single"), 1e-5);
}

// With pipeline stages too: a replica's gather never waits behind a receive whose send waits
// on the other replica's gather (the executor's order puts each receive after its send).
TEST_F(ZeroRuns, ZeroThreeWithPipelineStagesTrainsLikeASingleProcess) {
  const std::string arms = R"(
[[arm]]
name = "1f1b"
parallel = { zero_stage = 3, dp = 2, pp = 2 }
[[arm]]
name = "gpipe"
parallel = { zero_stage = 3, dp = 2, pp = 2 }
scheduler = "gpipe"
)";
  RealBackend backend;
  auto outs = RunAll(std::string(kMlp) + arms, backend);
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& o : outs) {
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_LT(MetricOf(*o, "max_loss_diff_vs_single"), 1e-6);
    EXPECT_LT(MetricOf(*o, "max_grad_norm_rel_diff_vs_single"), 1e-5);
  }
}

}  // namespace
}  // namespace testbed
