// The "plan" backend end to end inside the process: an experiment resolved against the real
// fixture plugin (inline model and cluster), run, and its stage figures compared with values
// computed by hand from the model's shape and the closed-form fixture device model.
#include "engine/plan_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/experiment.h"
#include "config/run_config.h"
#include "engine/plugin_loader.h"
#include "test_support.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

// 2 blocks, h = 64, a = 4, s = 16, V = 100 (FFN 4h = 256); 4 devices of 1 TFLOP/s fp16.
constexpr const char* kExperiment = R"(
device_model = "fixture.flops"

[experiment]
name = "plan-check"
backend = "plan"

[model]
name = "tiny"
layers = 2
hidden = 64
heads = 4
seq_len = 16
vocab = 100

[cluster]
name = "quad"
[cluster.node]
name = "quad-node"
devices = 4
hubs = ["sw"]
links = [["gpu0", "sw", "l"], ["gpu1", "sw", "l"], ["gpu2", "sw", "l"], ["gpu3", "sw", "l"]]
[cluster.node.link_types]
l = { kind = "pcie", bandwidth_gb_per_s = 10 }
[cluster.node.device]
name = "unit"
memory_gib = 1
memory_bandwidth_gb_per_s = 100
[cluster.node.device.peak_tflops]
fp32 = 0.5
fp16 = 1.0

[train]
global_batch = 16
micro_batch = 2

[parallel]
pp = 2

[[arm]]
name = "plain"
partitioner = "fixture.uniform"

[[arm]]
name = "recompute"
partitioner = { use = "fixture.uniform", recompute_first = true }

[[arm]]
name = "chain"
partitioner = "fixture.uniform"
precision_policy = "fixture.mark"
tp_planner = "fixture.recompute_last"

[[arm]]
name = "broken-chain"
partitioner = "fixture.uniform"
tp_planner = { use = "fixture.recompute_last", break_plan = true }
)";

class PlanBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(loader_.Load(std::filesystem::path(TESTBED_TEST_PLUGIN_DIR) / "good" / "fixture_good.so").ok());
    file_ = dir_ / "plan.toml";
    testing::WriteFile(file_, kExperiment);
  }
  absl::StatusOr<RunOutput> RunArm(int index) {
    auto ex = Experiment::Load(file_, {});
    if (!ex.ok()) return ex.status();
    auto run = ResolveRun(ex->runs().at(static_cast<size_t>(index)), registry_, presets_);
    if (!run.ok()) return run.status();
    PlanBackend backend;
    return backend.Run(*run, registry_, RunControl{});
  }

  Registry registry_;
  PluginLoader loader_{registry_};
  PresetLibrary presets_{{}};
  testing::TempDir dir_;
  std::filesystem::path file_;
};

// Hand-computed per-sample forward FLOPs (Megatron-LM's matrix FLOPs):
//   attention 8sh² + 4s²h = 8·16·64² + 4·16²·64 = 524288 + 65536 = 589824
//   MLP       4shf        = 4·16·64·256             = 1048576
//   head      2shV        = 2·16·64·100             = 204800, embedding 0.
// Layers: embedding, att0, mlp0, att1, mlp1, head; pp = 2 splits them 3 + 3.
constexpr double kAtt = 589824, kMlp = 1048576, kHead = 204800;
constexpr double kStage0Fwd = kAtt + kMlp, kStage1Fwd = kAtt + kMlp + kHead;

TEST_F(PlanBackendTest, StageFiguresMatchHandComputation) {
  auto out = RunArm(0);
  ASSERT_TRUE(out.ok()) << out.status();
  auto metric = [&](const char* name) {
    const Metric* m = out->metrics.Find(name);
    return m ? m->value : -1.0;
  };
  EXPECT_EQ(metric("tp"), 1);
  EXPECT_EQ(metric("pp"), 2);
  EXPECT_EQ(metric("dp"), 2);             // 4 devices / (tp 1 x pp 2)
  EXPECT_EQ(metric("micro_batch"), 2);
  EXPECT_EQ(metric("micro_batches"), 4);  // 16 / (2 x 2)
  // forward + backward = 3 x forward, 2 samples, 1e12 FLOP/s.
  const double t0 = 3 * kStage0Fwd * 2 / 1e12, t1 = 3 * kStage1Fwd * 2 / 1e12;
  EXPECT_DOUBLE_EQ(metric("stage_time_max_s"), t1);
  EXPECT_DOUBLE_EQ(metric("stage_time_mean_s"), (t0 + t1) / 2);
  EXPECT_DOUBLE_EQ(metric("stage_balance"), 18.0 / 17.0);  // 1843200 / 1740800
  // Parameters: embedding Vh + sh = 7424, attention 4h² + 6h = 16768, MLP 2hf + f + 3h = 33216,
  // head 2h = 128 plus its copy of the tied embedding matrix Vh = 6400.
  EXPECT_EQ(metric("stage_params_max"), 7424 + 16768 + 33216);
  EXPECT_EQ(out->metrics.Find("stage_balance")->unit, "1");
  EXPECT_EQ(out->metrics.Find("stage_time_max_s")->better, Better::kLower);

  ASSERT_EQ(out->tables.size(), 1u);
  const Table& t = out->tables[0];
  EXPECT_EQ(t.name, "stages");
  const auto& params = std::get<std::vector<std::int64_t>>(t.Find("params")->values);
  EXPECT_EQ(params, (std::vector<std::int64_t>{7424 + 16768 + 33216, 16768 + 33216 + 128 + 6400}));
  const auto& layers = std::get<std::vector<std::int64_t>>(t.Find("layers")->values);
  EXPECT_EQ(layers, (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(t.Find("time_s")->unit, "s");
}

TEST_F(PlanBackendTest, RecomputationAddsOneForwardOfTheRecomputedLayer) {
  auto out = RunArm(1);
  ASSERT_TRUE(out.ok()) << out.status();
  // Stage 0 recomputes the embedding (no FLOPs); stage 1 recomputes att1.
  const double t1 = (3 * kStage1Fwd + kAtt) * 2 / 1e12;
  EXPECT_DOUBLE_EQ(out->metrics.Find("stage_time_max_s")->value, t1);
}

TEST_F(PlanBackendTest, ThePlanningChainRunsItsKindsInChainOrderOverOnePlan) {
  auto out = RunArm(2);
  ASSERT_TRUE(out.ok()) << out.status();
  // tp_planner before precision_policy, whatever the order in the file.
  EXPECT_EQ(out->metrics.Find("chain_order")->value, 12);
  EXPECT_NE(out->metrics.Find("tp_planner_time_s"), nullptr);
  EXPECT_NE(out->metrics.Find("precision_policy_time_s"), nullptr);
  // The tp_planner's change reached the backend: stage 1 recomputes att1.
  const double t1 = (3 * kStage1Fwd + kAtt) * 2 / 1e12;
  EXPECT_DOUBLE_EQ(out->metrics.Find("stage_time_max_s")->value, t1);
}

TEST_F(PlanBackendTest, ARefinerThatBreaksThePlanIsNamed) {
  auto out = RunArm(3);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("tp_planner 'fixture.recompute_last' left an invalid plan: plan has no stages"));
}

TEST_F(PlanBackendTest, ResolvedRunRecordsEveryComponentParameter) {
  auto ex = Experiment::Load(file_, {});
  ASSERT_TRUE(ex.ok());
  auto run = ResolveRun(ex->runs()[1], registry_, presets_);
  ASSERT_TRUE(run.ok()) << run.status();
  std::map<std::string, ParamValue> rec(run->recorded.begin(), run->recorded.end());
  EXPECT_EQ(std::get<std::string>(rec.at("partitioner")), "fixture.uniform");
  EXPECT_EQ(std::get<bool>(rec.at("partitioner.recompute_first")), true);
  EXPECT_EQ(std::get<std::int64_t>(rec.at("partitioner.micro_batch")), 0);
  EXPECT_EQ(std::get<std::string>(rec.at("device_model")), "fixture.flops");
  EXPECT_EQ(std::get<double>(rec.at("device_model.efficiency")), 1.0);
  EXPECT_EQ(std::get<std::int64_t>(rec.at("train.micro_batch")), 2);
  EXPECT_EQ(std::get<std::int64_t>(rec.at("cluster.devices")), 4);
  // 12Lh² + 13Lh + Vh + sh + 2h = 98304 + 1664 + 6400 + 1024 + 128
  EXPECT_EQ(std::get<std::int64_t>(rec.at("model.params")), 107520);
  EXPECT_EQ(run->config_hash.size(), 16u);
}

TEST_F(PlanBackendTest, UnknownComponentListsTheAvailableOnes) {
  auto ex = Experiment::Load(file_, {"arm.plain.partitioner=\"fixture.unifrom\""});
  ASSERT_TRUE(ex.ok()) << ex.status();
  auto run = ResolveRun(ex->runs()[0], registry_, presets_);
  ASSERT_FALSE(run.ok());
  const std::string msg(run.status().message());
  EXPECT_THAT(msg, HasSubstr("unknown partitioner 'fixture.unifrom' (did you mean 'fixture.uniform'?)"));
  EXPECT_THAT(msg, HasSubstr("available: fixture.uniform"));
}

}  // namespace
}  // namespace testbed
