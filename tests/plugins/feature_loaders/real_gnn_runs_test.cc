// GNN training for real (backend "real", exec/gnn_training.h) with each feature loader: the
// model reads its input rows only from the rows the loader brought to the device, so every
// loader must train exactly the same model (bitwise losses) while copying less; the bytes
// copied per step equal the simulator's for the same run; data parallelism over two replicas
// equals one replica taking both micro-batches; GraphSAGE, GCN and GAT learn Cora; bad
// settings are refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "exec/real_backend.h"
#include "experiment_runs.h"
#include "graph/device_rows.h"
#include "sim/sim_backend.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ColumnOf;
using testing::MetricOf;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kShort = true;
#else
constexpr bool kShort = false;
#endif

class RealGnn : public testing::ExperimentRuns {};

std::string Experiment(const std::string& backend, const std::string& model, const std::string& train,
                       const std::string& arms) {
  return R"(
[experiment]
name = "gnn-real"
backend = ")" + backend + R"("
seed = 7
)" + (backend == "sim" ? "[cluster]\npreset = \"rtx3090-64\"\nnodes = 1\n" : "[real]\npredict = false\n") + R"(
[model]
name = "gnn"
family = "gnn"
fanouts = [10, 5]
inputs = 1433
hidden = 32
heads = 4
vocab = 7
)" + model + R"(
[train]
precision = "fp32"
learning_rate = 0.01
)" + train + arms;
}

std::string Arm(const std::string& use, const std::string& loader) {
  std::string name = use;
  for (char& c : name) c = c == '.' ? '-' : c;
  return "[[arm]]\nname = \"" + name + "\"\nfeature_loader = { use = \"" + use + "\", graph = \"cora\"" + loader +
         " }\n";
}

const std::string kFourLoaders = Arm("none", "") + Arm("pagraph.static_cache", ", budget_fraction = 0.2") +
                                 Arm("brgraph", "") + Arm("brgraph.two_level", ", budget_fraction = 0.2");

TEST_F(RealGnn, EveryLoaderTrainsTheSameModelAndCopiesWhatTheSimulatorCopies) {
  const std::string train = "micro_batch = 32\nmicro_batches = 1\nsteps = 6\n[parallel]\ndp = 2\n";
  RealBackend real;
  auto outs = RunAll(Experiment("real", "", train, kFourLoaders), real);
  ASSERT_EQ(outs.size(), 4u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  const auto none_loss = ColumnOf<double>(*outs[0], "loss_curve", "loss");
  ASSERT_EQ(none_loss.size(), 6u);
  for (const auto& o : outs) {
    // The same rows reach the model whichever loader brought them: the same losses, bit for bit.
    EXPECT_EQ(ColumnOf<double>(*o, "loss_curve", "loss"), none_loss);
    EXPECT_GE(MetricOf(*o, "measured_host_copy_s_per_step"), 0);
    EXPECT_GT(MetricOf(*o, "test_accuracy"), 0);
  }
  EXPECT_EQ(MetricOf(*outs[0], "feature_copy_fraction"), 1.0);
  EXPECT_EQ(MetricOf(*outs[0], "duplicate_detection_s_per_step"), 0);
  EXPECT_GT(MetricOf(*outs[2], "duplicate_detection_s_per_step"), 0);
  const auto none_bytes = ColumnOf<double>(*outs[0], "loss_curve", "copy_bytes");
  const auto reuse_bytes = ColumnOf<double>(*outs[2], "loss_curve", "copy_bytes");
  const auto two_level_bytes = ColumnOf<double>(*outs[3], "loss_curve", "copy_bytes");
  ASSERT_EQ(reuse_bytes.size(), none_bytes.size());
  for (size_t i = 0; i < none_bytes.size(); ++i) {
    EXPECT_LE(reuse_bytes[i], none_bytes[i]) << "step " << i;
    EXPECT_LE(two_level_bytes[i], reuse_bytes[i]) << "step " << i;
  }
  // Past the first step reuse finds shared vertices on Cora's small graph.
  EXPECT_LT(MetricOf(*outs[2], "feature_copy_bytes_per_step"), MetricOf(*outs[0], "feature_copy_bytes_per_step"));
  // The static cache holds its 20% from Begin on.
  EXPECT_EQ(MetricOf(*outs[1], "feature_setup_copy_bytes"), std::floor(0.2 * 2708) * 4 * 1433);

  SimBackend sim;
  auto simulated = RunAll(Experiment("sim", "", train, kFourLoaders), sim);
  ASSERT_EQ(simulated.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(simulated[i].ok()) << simulated[i].status();
    // The same batches, the same loader answers: the same bytes per replica and iteration.
    EXPECT_NEAR(MetricOf(*simulated[i], "feature_copy_bytes_per_step"), MetricOf(*outs[i], "feature_copy_bytes_per_step"),
                1e-9 * MetricOf(*outs[i], "feature_copy_bytes_per_step"))
        << "arm " << i;
    EXPECT_EQ(MetricOf(*simulated[i], "feature_rows_resident_peak"), MetricOf(*outs[i], "feature_rows_resident_peak"))
        << "arm " << i;
    EXPECT_EQ(MetricOf(*simulated[i], "feature_device_mib_peak"), MetricOf(*outs[i], "feature_device_mib_peak"))
        << "arm " << i;
  }
}

TEST_F(RealGnn, TwoReplicasEqualOneReplicaTakingBothMicroBatches) {
  RealBackend real;
  auto dp2 = RunAll(Experiment("real", "", "micro_batch = 16\nmicro_batches = 1\nsteps = 4\n[parallel]\ndp = 2\n",
                               Arm("brgraph", "")),
                    real);
  auto dp1 = RunAll(Experiment("real", "", "micro_batch = 16\nmicro_batches = 2\nsteps = 4\n[parallel]\ndp = 1\n",
                               Arm("brgraph", "")),
                    real);
  ASSERT_EQ(dp2.size(), 1u);
  ASSERT_EQ(dp1.size(), 1u);
  ASSERT_TRUE(dp2[0].ok()) << dp2[0].status();
  ASSERT_TRUE(dp1[0].ok()) << dp1[0].status();
  // Global batch g = (iteration x micro_batches + m) x dp + replica: the same batches in the
  // same order, and the gradients averaged over the same 32 seeds.
  const auto a = ColumnOf<double>(*dp2[0], "loss_curve", "loss"), b = ColumnOf<double>(*dp1[0], "loss_curve", "loss");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(MetricOf(*dp2[0], "dp"), 2);
}

TEST_F(RealGnn, SageGcnAndGatLearnCora) {
  RealBackend real;
  const int steps = kShort ? 4 : 60;
  const std::string train = "micro_batch = 64\nmicro_batches = 1\nsteps = " + std::to_string(steps) + "\n";
  for (const char* layer : {"sage", "gcn", "gat"}) {
    auto outs = RunAll(Experiment("real", std::string("gnn_layer = \"") + layer + "\"\n", train, Arm("brgraph", "")), real);
    ASSERT_EQ(outs.size(), 1u);
    ASSERT_TRUE(outs[0].ok()) << layer << ": " << outs[0].status();
    const auto loss = ColumnOf<double>(*outs[0], "loss_curve", "loss");
    ASSERT_EQ(loss.size(), static_cast<size_t>(steps));
    // Mean of the first and last few steps: the loss falls.
    EXPECT_LT(loss.back() + loss[loss.size() - 2], loss[0] + loss[1]) << layer;
    if (!kShort) {
      // About 27 epochs of Cora's 140 training vertices, no dropout, no validation-based
      // stopping: well above the 0.3 of always answering the largest class.
      EXPECT_GT(MetricOf(*outs[0], "test_accuracy"), 0.65) << layer;
    }
  }
}

TEST_F(RealGnn, GeneratedGraphsGetFeaturesAndLabels) {
  RealBackend real;
  auto outs = RunAll(Experiment("real", "", "micro_batch = 64\nmicro_batches = 1\nsteps = 3\n",
                                "[[arm]]\nname = \"rmat\"\nfeature_loader = { use = \"brgraph\", graph = \"rmat\", "
                                "vertices = 5000, edges = 40000 }\n\"model.inputs\" = 16\n\"model.vocab\" = 4\n"),
                     real);
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  EXPECT_EQ(MetricOf(*outs[0], "graph_generated"), 1);
  EXPECT_EQ(MetricOf(*outs[0], "feature_row_bytes"), 64);
  EXPECT_GE(MetricOf(*outs[0], "test_accuracy"), 0);
}

TEST_F(RealGnn, BadSettingsAreRefusedByName) {
  RealBackend real;
  auto no_loader = RunAll(Experiment("real", "", "micro_batch = 8\nsteps = 1\n", "[[arm]]\nname = \"bare\"\n"), real);
  ASSERT_EQ(no_loader.size(), 1u);
  ASSERT_FALSE(no_loader[0].ok());
  EXPECT_THAT(no_loader[0].status().message(), HasSubstr("with a feature_loader"));
  auto narrow = RunAll(Experiment("real", "", "micro_batch = 8\nsteps = 1\n",
                                  Arm("none", "") + "\"model.inputs\" = 100\n"),
                       real);
  ASSERT_EQ(narrow.size(), 1u);
  ASSERT_FALSE(narrow[0].ok());
  EXPECT_THAT(narrow[0].status().message(), HasSubstr("inputs = 1433"));
  auto cuda = RunAll(Experiment("real", "", "micro_batch = 8\nsteps = 1\n",
                                Arm("none", "") + "\"real.device\" = \"cuda\"\n"),
                     real);
  ASSERT_EQ(cuda.size(), 1u);
  ASSERT_FALSE(cuda[0].ok());
  EXPECT_THAT(cuda[0].status().message(), HasSubstr("on the CPU only"));
}

// The device rows alone: a batch reading a row no copy brought is refused by vertex, rows
// not kept leave, and the buffer never holds more than the batch and what is kept.
TEST(DeviceRows, HoldsOnlyWhatTheLoaderCopiedAndKept) {
  train::Matrix<float> host(6, 2);
  for (Eigen::Index i = 0; i < host.size(); ++i) host.data()[i] = static_cast<float>(i);
  DeviceRows d(host);
  train::Matrix<float> x;
  const std::vector<std::int64_t> batch = {4, 1};
  auto s = d.Apply(FeatureLoad{{1, 4}, {4}, 0}, batch, &x);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(x.row(0), host.row(4));
  EXPECT_EQ(x.row(1), host.row(1));
  EXPECT_EQ(d.resident_rows(), 1);
  const std::vector<std::int64_t> next = {4, 2};
  auto missing = d.Apply(FeatureLoad{{}, {}, 0}, next, &x);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("vertex 2"));
}

}  // namespace
}  // namespace testbed
