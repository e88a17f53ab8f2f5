// Delayed SGD in whole real runs: with delay = 0 training is bit for bit synchronous SGD; with a
// delay of tau the first tau + 1 losses are those of a model that does not move (nothing is
// applied before a gradient tau steps old exists) and later ones differ from synchronous
// training; a data-parallel delayed run equals the single-process delayed run; random delays
// stay within 0..tau and are recorded per step; the generalisation-gap metrics are the
// difference of the two evaluations; bad settings are refused by name.
#include <gmock/gmock.h>
#include <cmath>
#include <gtest/gtest.h>

#include "exec/real_backend.h"
#include "experiment_runs.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ColumnOf;
using testing::MetricOf;

class DelayedSgdRuns : public testing::ExperimentRuns {};

// A linear model on the digits with plain SGD: 12 steps of 16 samples.
std::string Experiment(const std::string& common, const std::string& arms) {
  return R"(
communicator = "local"
[experiment]
name = "delayed"
backend = "real"
[real]
check_against_single = false
predict = false
momentum = 0.0
)" + common + R"(
[model]
name = "linear"
family = "mlp"
layers = 0
inputs = 64
vocab = 10
[data]
dataset = "digits"
max_samples = 400
[train]
global_batch = 16
micro_batch = 8
steps = 12
optimizer = "sgd"
learning_rate = 0.1
precision = "fp32"
)" + arms;
}

TEST_F(DelayedSgdRuns, ZeroDelayIsSynchronousAndADelayAppliesNothingForItsFirstSteps) {
  const std::string arms = R"(
[[arm]]
name = "sync"
[[arm]]
name = "delay-0"
real = { delay = 0 }
[[arm]]
name = "delay-3"
real = { delay = 3 }
[[arm]]
name = "frozen"
train = { learning_rate = 0.0 }
)";
  RealBackend backend;
  auto outs = RunAll(Experiment("", arms), backend);
  ASSERT_EQ(outs.size(), 4u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  auto loss = [&](int i) { return ColumnOf<double>(*outs[static_cast<size_t>(i)], "loss_curve", "loss"); };
  const std::vector<double> sync = loss(0), zero = loss(1), delayed = loss(2), frozen = loss(3);
  ASSERT_EQ(sync.size(), 12u);
  EXPECT_EQ(zero, sync);  // bit for bit
  EXPECT_EQ(MetricOf(*outs[1], "train_set_loss"), MetricOf(*outs[0], "train_set_loss"));
  // Steps 0..3 see the initial weights: the frozen model's losses on the same batches.
  for (size_t t = 0; t <= 3; ++t) EXPECT_EQ(delayed[t], frozen[t]) << "step " << t;
  EXPECT_NE(delayed[4], frozen[4]);  // step 3 applied step 0's gradient
  EXPECT_NE(delayed, sync);
  EXPECT_EQ(MetricOf(*outs[2], "updates_applied"), 9.0);
  EXPECT_EQ(MetricOf(*outs[2], "mean_applied_delay"), 3.0);
  const std::vector<std::int64_t> applied = ColumnOf<std::int64_t>(*outs[2], "loss_curve", "applied_delay");
  EXPECT_EQ(applied, (std::vector<std::int64_t>{-1, -1, -1, 3, 3, 3, 3, 3, 3, 3, 3, 3}));
  // The bound's shape at T = 12, n = 360 training samples, tau = 3.
  EXPECT_DOUBLE_EQ(MetricOf(*outs[2], "bound_shape"), (12.0 - 3.0) / (360.0 * 3.0));
  for (const auto& o : outs) {
    EXPECT_DOUBLE_EQ(MetricOf(*o, "generalization_gap"), MetricOf(*o, "validation_loss") - MetricOf(*o, "train_set_loss"));
    EXPECT_GT(MetricOf(*o, "train_set_accuracy"), 0.0);
  }
}

TEST_F(DelayedSgdRuns, DataParallelDelayedTrainingEqualsSingleProcessDelayedTraining) {
  const std::string common = R"(
[parallel]
dp = 2
)";
  const std::string arms = R"(
[[arm]]
name = "fixed"
real = { delay = 2, check_against_single = true }
[[arm]]
name = "random"
real = { delay = 4, delay_kind = "random", check_against_single = true, weight_decay = 0.01, loss = "squared" }
)";
  RealBackend backend;
  auto outs = RunAll(Experiment(common, arms), backend);
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& o : outs) {
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_GE(MetricOf(*o, "max_loss_diff_vs_single"), 0.0);
    EXPECT_LT(MetricOf(*o, "max_loss_diff_vs_single"), 1e-6);
    EXPECT_LT(MetricOf(*o, "max_grad_norm_rel_diff_vs_single"), 1e-5);
  }
  const std::vector<std::int64_t> applied = ColumnOf<std::int64_t>(*outs[1], "loss_curve", "applied_delay");
  ASSERT_EQ(applied.size(), 12u);
  int updates = 0;
  for (size_t t = 0; t < applied.size(); ++t) {
    EXPECT_GE(applied[t], -1);
    EXPECT_LE(applied[t], 4);
    if (applied[t] >= 0) {
      EXPECT_LE(applied[t], static_cast<std::int64_t>(t)) << "a gradient from before the first step";
      ++updates;
    }
  }
  EXPECT_EQ(MetricOf(*outs[1], "updates_applied"), updates);
  EXPECT_EQ(MetricOf(*outs[1], "bound_shape"), -1.0);  // fixed delays only
}

TEST_F(DelayedSgdRuns, ADivergedRunDoesNotAgreeWithTheReference) {
  // A step size that overflows the squared loss: both runs' losses stop being finite, which is
  // no agreement (the difference is infinite, not 0), and a bound on it fails the run.
  const std::string arms = R"(
[[arm]]
name = "diverged"
train = { learning_rate = 1e30 }
real = { check_against_single = true, loss = "squared" }
[[arm]]
name = "bounded"
train = { learning_rate = 1e30 }
real = { check_against_single = true, loss = "squared", max_loss_diff_vs_single = 1.0 }
)";
  RealBackend backend;
  auto outs = RunAll(Experiment("[parallel]\ndp = 2\n", arms), backend);
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  EXPECT_TRUE(std::isinf(MetricOf(*outs[0], "max_loss_diff_vs_single")));
  ASSERT_FALSE(outs[1].ok());
  EXPECT_THAT(std::string(outs[1].status().message()), HasSubstr("more than [real] max_loss_diff_vs_single"));
}

TEST_F(DelayedSgdRuns, BadSettingsAreRefusedByName) {
  RealBackend backend;
  auto one = [&](const std::string& arm) {
    auto outs = RunAll(Experiment("", "[[arm]]\nname = \"a\"\n" + arm + "\n"), backend);
    EXPECT_EQ(outs.size(), 1u);
    EXPECT_FALSE(outs[0].ok());
    return std::string(outs[0].status().message());
  };
  EXPECT_THAT(one("real = { delay = -1 }"), HasSubstr("'delay': expected int in [0, 1024] (steps), got -1"));
  EXPECT_THAT(one("real = { delay_kind = \"sometimes\" }"), HasSubstr("'delay_kind'"));
  EXPECT_THAT(one("real = { loss = \"hinge\" }"), HasSubstr("'loss'"));
}

}  // namespace
}  // namespace testbed
