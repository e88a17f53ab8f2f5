// PipeDream-2BW run for real: the whole no-flush schedule on real ranks, each micro-batch's
// backward on the weight version its forward used, each iteration's gradients kept apart
// from the next's. Checked against references:
//   - on a quadratic (least squares with a linear model), the losses follow the closed-form
//     trajectory W(t+1) = W(t) - lr grad f_{t-1}(W(t-1)), not synchronous SGD's;
//   - on 4 pipeline stages (and 2 x 2 with data parallelism) a tiny GPT trains exactly as one
//     process does with every update one step late (delayed SGD, tau = 1);
//   - a stage stashes one extra version of its weights and one iteration's gradients;
//   - fewer micro-batches than stages is refused with the rule it breaks.
#include <gtest/gtest.h>

#include <cmath>

#include "built_components.h"
#include "engine/plugin_loader.h"
#include "exec/data_sources.h"
#include "exec/executor.h"
#include "exec/executor_stack.h"
#include "sim_fixtures.h"
#include "testbed/communicator.h"
#include "testbed/partitioner.h"
#include "testbed/scheduler.h"
#include "testbed/status_macros.h"
#include "testbed/train/char_corpus.h"

namespace testbed::exec {
namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

class TwoBWTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new Registry();
    loader_ = new PluginLoader(*registry_);
    loader_->LoadDirectories({TESTBED_TEST_PLUGIN_DIR});
    auto corpus = train::CharCorpus::Load(TESTBED_TEST_CORPUS);
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    corpus_ = new train::CharCorpus(std::move(*corpus));
  }

  template <typename T>
  static absl::StatusOr<std::shared_ptr<T>> Make(const std::string& name) {
    return testing::MakeComponent<T>(*registry_, name);
  }

  struct Setup {
    ModelGraph graph;
    TrainSettings train;
    ParallelSettings parallel;
    std::string scheduler = "pipedream_2bw";
    BatchSource data;
    train::LossKind loss = train::LossKind::kCrossEntropy;
    train::DelayOptions delay{};
    double momentum = 0.0;
  };

  static absl::StatusOr<ExecutionResult> Run(const Setup& s) {
    const int world = s.parallel.tp * s.parallel.pp * std::max(1, s.parallel.dp);
    const Cluster cluster = testing::StarCluster(world, 1e10, 1e-6);
    TESTBED_ASSIGN_OR_RETURN(auto dm, Make<DeviceModel>("roofline"));
    TESTBED_ASSIGN_OR_RETURN(auto part, Make<Partitioner>("megatron.uniform"));
    TESTBED_ASSIGN_OR_RETURN(auto sched, Make<Scheduler>(s.scheduler));
    PlanningContext ctx{s.graph, cluster, s.train, s.parallel, *dm, 1, {}};
    TESTBED_ASSIGN_OR_RETURN(Plan plan, part->Partition(ctx));
    SchedulingContext sctx{s.graph, cluster, plan, s.train, *dm};
    sctx.iterations = static_cast<int>(s.train.steps);
    TESTBED_ASSIGN_OR_RETURN(Schedule schedule, sched->BuildSchedule(sctx));
    if (!schedule.overlapping_iterations()) sctx.iterations = 1;
    if (!schedule.overlapping_iterations()) {
      TESTBED_ASSIGN_OR_RETURN(schedule, sched->BuildSchedule(sctx));
    }
    TESTBED_RETURN_IF_ERROR(schedule.Check());
    TESTBED_ASSIGN_OR_RETURN(auto comm, Make<Communicator>("local"));
    TESTBED_ASSIGN_OR_RETURN(auto endpoints, comm->Connect(world));
    ExecutorInputs in{.model = s.graph, .plan = plan, .schedule = schedule, .train = s.train, .data = s.data, .seed = 5};
    in.loss = s.loss;
    in.sgd_momentum = s.momentum;
    in.delay = s.delay;
    return Execute(in, std::move(endpoints));
  }

  static ModelGraph TinyGpt() {
    ModelShape shape;
    shape.name = "tiny";
    shape.layers = 4;
    shape.hidden = 32;
    shape.heads = 4;
    shape.seq_len = 16;
    shape.vocab = corpus_->vocab_size();
    shape.tied_embeddings = false;
    return *BuildModelGraph(shape);
  }

  static Setup GptSetup(int pp, int dp) {
    Setup s;
    s.graph = TinyGpt();
    s.train.global_batch = 16;
    s.train.micro_batch = 2;
    s.train.steps = 6;
    s.train.optimizer = "sgd";
    s.train.learning_rate = 0.5;
    s.train.precision = Precision::kFp32;
    s.parallel.pp = pp;
    s.parallel.dp = dp;
    s.data = TextSource(*corpus_, s.graph.shape.seq_len, 5);
    s.momentum = 0.9;
    return s;
  }

  static Registry* registry_;
  static PluginLoader* loader_;
  static train::CharCorpus* corpus_;
};

Registry* TwoBWTest::registry_ = nullptr;
PluginLoader* TwoBWTest::loader_ = nullptr;
train::CharCorpus* TwoBWTest::corpus_ = nullptr;

// Step t's rows of a fixed synthetic regression problem: 3 features, 2 classes.
Batch QuadraticBatch(std::int64_t step, std::int64_t samples) {
  Batch b;
  b.inputs.resize(samples, 3);
  for (std::int64_t i = 0; i < samples; ++i) {
    for (int j = 0; j < 3; ++j) b.inputs(i, j) = static_cast<float>(std::sin(1.3 * (step * samples + i) + 0.7 * j));
    b.targets.push_back((step + i) % 2);
  }
  return b;
}

TEST_F(TwoBWTest, OnAQuadraticTheLossesFollowTheOneStepStaleUpdate) {
  // Least squares with a linear model: f_t(W, b) = 1/(2N) sum_i |x_i W + b - e(y_i)|^2.
  Setup s;
  ModelShape shape;
  shape.name = "linear";
  shape.family = "mlp";
  shape.layers = 0;
  shape.inputs = 3;
  shape.vocab = 2;
  s.graph = *BuildModelGraph(shape);
  s.train.global_batch = 4;
  s.train.micro_batch = 2;
  s.train.steps = 8;
  s.train.optimizer = "sgd";
  s.train.learning_rate = 0.3;
  s.train.precision = Precision::kFp32;
  s.loss = train::LossKind::kSquared;
  s.data = [](std::int64_t step, std::int64_t samples) -> absl::StatusOr<Batch> { return QuadraticBatch(step, samples); };
  auto run = Run(s);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->steps.size(), 8u);

  // The closed form from the same initial weights.
  auto model = BuildExecutorStack(s.graph, 5);
  ASSERT_TRUE(model.ok());
  const auto params = model->layer(0).Params();
  ASSERT_EQ(params.size(), 2u);
  const Mat w0 = params[0]->value.cast<double>(), b0 = params[1]->value.cast<double>();
  struct Point {
    Mat w, b;
  };
  auto loss_and_grad = [](std::int64_t step, const Point& p, Point* grad) {
    const Batch batch = QuadraticBatch(step, 4);
    const Mat x = batch.inputs.cast<double>();
    Mat y = Mat::Zero(4, 2);
    for (int i = 0; i < 4; ++i) y(i, batch.targets[static_cast<size_t>(i)]) = 1;
    Mat r = x * p.w;
    r.rowwise() += p.b.row(0);
    r -= y;
    if (grad != nullptr) {
      grad->w = x.transpose() * r / 4.0;
      grad->b = r.colwise().sum() / 4.0;
    }
    return 0.5 * r.squaredNorm() / 4.0;
  };
  const double lr = 0.3;
  // Iteration t runs on V(t): V(0) = V(1) = the initial weights, V(t) = V(t - 1) - lr
  // grad f_{t-2}(V(t - 2)) (the update of iteration t - 2's gradient lands before iteration t).
  std::vector<Point> v{{w0, b0}, {w0, b0}};
  std::vector<Point> sync{{w0, b0}};
  for (int t = 1; t < 8; ++t) {
    if (t >= 2) {
      Point g;
      loss_and_grad(t - 2, v[static_cast<size_t>(t - 2)], &g);
      v.push_back({v.back().w - lr * g.w, v.back().b - lr * g.b});
    }
    Point gs;
    loss_and_grad(t - 1, sync.back(), &gs);
    sync.push_back({sync.back().w - lr * gs.w, sync.back().b - lr * gs.b});
  }
  for (int t = 0; t < 8; ++t) {
    const double expected = loss_and_grad(t, v[static_cast<size_t>(t)], nullptr);
    EXPECT_NEAR(run->steps[static_cast<size_t>(t)].loss, expected, 1e-6 * std::max(1.0, expected)) << "step " << t;
    EXPECT_EQ(run->steps[static_cast<size_t>(t)].applied_delay, t == 0 ? -1 : 1);
  }
  // Synchronous SGD's trajectory is another one: the check tells them apart.
  EXPECT_GT(std::abs(run->steps[3].loss - loss_and_grad(3, sync[3], nullptr)), 1e-4);
}

TEST_F(TwoBWTest, PipelinesTrainAsOneProcessWhoseUpdatesAreOneStepLate) {
  Setup single = GptSetup(1, 1);
  single.scheduler = "1f1b";
  single.delay = train::DelayOptions{1, false, 1};
  auto ref = Run(single);
  ASSERT_TRUE(ref.ok()) << ref.status();
  Setup sync = GptSetup(1, 1);
  sync.scheduler = "1f1b";
  auto synchronous = Run(sync);
  ASSERT_TRUE(synchronous.ok()) << synchronous.status();
  for (auto [pp, dp] : {std::pair{4, 1}, std::pair{2, 2}}) {
    auto run = Run(GptSetup(pp, dp));
    ASSERT_TRUE(run.ok()) << "pp " << pp << " dp " << dp << ": " << run.status();
    ASSERT_EQ(run->steps.size(), ref->steps.size());
    for (size_t t = 0; t < run->steps.size(); ++t) {
      EXPECT_NEAR(run->steps[t].loss, ref->steps[t].loss, 1e-5) << "pp " << pp << " dp " << dp << " step " << t;
      EXPECT_NEAR(run->steps[t].grad_norm, ref->steps[t].grad_norm, 1e-4 * ref->steps[t].grad_norm)
          << "pp " << pp << " dp " << dp << " step " << t;
    }
    EXPECT_EQ(run->steps[0].loss, synchronous->steps[0].loss);
    EXPECT_GT(std::abs(run->steps[3].loss - synchronous->steps[3].loss), 1e-4);
    // One more version of a stage's weights and one iteration's gradients, as allocated.
    EXPECT_GT(run->weight_bytes, 0);
    EXPECT_EQ(run->weight_stash_bytes, run->weight_bytes);
    EXPECT_EQ(run->held_gradient_bytes, run->weight_bytes);
  }
  EXPECT_EQ(synchronous->weight_stash_bytes, 0);
}

TEST_F(TwoBWTest, FewerMicroBatchesThanStagesIsRefused) {
  Setup s = GptSetup(4, 1);
  s.train.global_batch = 4;  // 2 micro-batches of 2 over 4 stages
  auto run = Run(s);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(run.status().message().find("m >= depth"), std::string::npos) << run.status();
  EXPECT_NE(run.status().message().find("runs 2 micro-batches per iteration over 4 stages"), std::string::npos)
      << run.status();
}

}  // namespace
}  // namespace testbed::exec
