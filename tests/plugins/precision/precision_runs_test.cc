// Whole runs with the built precision plugins: the plan backend's BitOPs figures and table
// against a hand count, the simulator's iteration time and gradient traffic falling with the
// widths, real training of the digits MLP where a policy at 32 bits everywhere is bit for bit
// the run without a policy while 4-bit training differs, and bad settings refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/plan_backend.h"
#include "exec/real_backend.h"
#include "experiment_runs.h"
#include "sim/sim_backend.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

using testing::MetricOf;

class PrecisionRuns : public testing::ExperimentRuns {
 protected:
  void SetUp() override {
    ExperimentRuns::SetUp();
    ASSERT_NE(registry_.Find(ComponentKind::kPrecisionPolicy, "dpc"), nullptr);
    ASSERT_NE(registry_.Find(ComponentKind::kPrecisionPolicy, "uniform"), nullptr);
  }
};

// 64 inputs, two hidden layers of 32, 10 classes: 64x32, 32x32, 32x10 products.
constexpr const char* kMlpModel = R"(
[model]
name = "mlp"
family = "mlp"
layers = 2
hidden = 32
inputs = 64
vocab = 10
)";

TEST_F(PrecisionRuns, BitOpsAndTheLayerTableMatchAHandCount) {
  const std::string text = std::string(R"(
device_model = "fixture.flops"
partitioner = "fixture.uniform"
[experiment]
name = "bitops"
backend = "plan"
[cluster]
name = "one"
[cluster.node]
name = "n"
devices = 1
hubs = ["sw"]
links = [["gpu0", "sw", "l"]]
[cluster.node.link_types]
l = { kind = "pcie", bandwidth_gb_per_s = 10 }
[cluster.node.device]
name = "unit"
memory_gib = 1
memory_bandwidth_gb_per_s = 100
[cluster.node.device.peak_tflops]
fp32 = 1.0
fp16 = 2.0
int8 = 4.0
[train]
global_batch = 8
micro_batch = 8
precision = "fp16"
[[arm]]
name = "mixed"
precision_policy = { use = "uniform", bits = 6, layer_bits = ["dense0=8", "classifier=0"] }
)") + kMlpModel;
  PlanBackend backend;
  auto outs = RunAll(text, backend);
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  // dense0 2,048 MACs at 8 x 8, dense1 1,024 at 6 x 6, head 320 at the run's fp16: 16 x 16.
  const double ours = 2048.0 * 64 + 1024.0 * 36 + 320.0 * 256;
  const double fp32 = (2048.0 + 1024 + 320) * 1024, int8 = (2048.0 + 1024 + 320) * 64;
  EXPECT_DOUBLE_EQ(MetricOf(*outs[0], "forward_bitops_per_sample"), ours);
  EXPECT_DOUBLE_EQ(MetricOf(*outs[0], "bitops_vs_fp32"), ours / fp32);
  EXPECT_DOUBLE_EQ(MetricOf(*outs[0], "bitops_vs_uniform8"), ours / int8);
  const Table* table = nullptr;
  for (const Table& t : outs[0]->tables) {
    if (t.name == "layer_precision") table = &t;
  }
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(table->Find("weight_bits")->values),
            (std::vector<std::int64_t>{8, 6, 16}));
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(table->Find("gradient_bits")->values),
            (std::vector<std::int64_t>{16, 16, 16}));
  EXPECT_EQ(std::get<std::vector<double>>(table->Find("forward_bitops_per_sample")->values),
            (std::vector<double>{2048.0 * 64, 1024.0 * 36, 320.0 * 256}));
}

TEST_F(PrecisionRuns, TheSimulatorChargesEachLayerAtItsWidth) {
  const std::string text = R"(
[experiment]
name = "sim-widths"
backend = "sim"
[model]
preset = "gpt-1.5b"
[cluster]
preset = "dgx-a100"
nodes = 1
[train]
global_batch = 16
micro_batch = 2
[[arm]]
name = "fp16"
[[arm]]
name = "int8"
precision_policy = { use = "uniform", bits = 8 }
[[arm]]
name = "int8-grads8"
precision_policy = { use = "uniform", bits = 8, gradient_bits = 8 }
[[arm]]
name = "int4"
precision_policy = { use = "uniform", bits = 4 }
[[arm]]
name = "dpc"
precision_policy = "dpc"
)";
  SimBackend backend;
  auto outs = RunAll(text, backend);
  ASSERT_EQ(outs.size(), 5u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  auto t = [&](int i) { return MetricOf(*outs[static_cast<size_t>(i)], "compute_time_max_s"); };
  // The A100's int8 peak is twice its fp16 one and int4 twice int8; compute falls with the width.
  EXPECT_LT(t(1), t(0));
  EXPECT_LT(t(3), t(1));
  EXPECT_LT(t(4), t(1));  // DPC: 8-bit edges, narrower blocks
  EXPECT_GT(t(4), t(3));
  // Stored activations at 8 bits take half the 16-bit bytes: the peak memory falls.
  EXPECT_LT(MetricOf(*outs[1], "memory_peak_bytes"), MetricOf(*outs[0], "memory_peak_bytes"));
  // 8-bit gradients halve what the data-parallel all-reduces carry.
  const double g16 = MetricOf(*outs[1], "exposed_comm_s"), g8 = MetricOf(*outs[2], "exposed_comm_s");
  EXPECT_LE(g8, g16);
  EXPECT_LT(MetricOf(*outs[2], "iteration_time_s"), MetricOf(*outs[1], "iteration_time_s") + 1e-12);
  EXPECT_DOUBLE_EQ(MetricOf(*outs[3], "bitops_vs_uniform8"), 0.25);
}

TEST_F(PrecisionRuns, ThirtyTwoBitsEverywhereTrainsBitForBitLikeNoPolicyAndFourBitsDoesNot) {
  const std::string text = std::string(R"(
communicator = "local"
[experiment]
name = "real-widths"
backend = "real"
[parallel]
dp = 2
[real]
check_against_single = false
predict = false
[data]
dataset = "digits"
[train]
global_batch = 32
micro_batch = 8
steps = 12
optimizer = "sgd"
learning_rate = 0.1
precision = "fp32"
[[arm]]
name = "none"
[[arm]]
name = "dpc-32"
precision_policy = { use = "dpc", ladder = [32], edge_bits = 32 }
[[arm]]
name = "uniform-32"
precision_policy = { use = "uniform", bits = 32, gradient_bits = 32 }
[[arm]]
name = "uniform-4"
precision_policy = { use = "uniform", bits = 4 }
)") + kMlpModel;
  RealBackend backend;
  auto outs = RunAll(text, backend);
  ASSERT_EQ(outs.size(), 4u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  auto curve = [&](int i) { return testing::ColumnOf<double>(*outs[static_cast<size_t>(i)], "loss_curve", "loss"); };
  ASSERT_EQ(curve(0).size(), 12u);
  EXPECT_EQ(curve(1), curve(0));  // exact equality of every step's loss
  EXPECT_EQ(curve(2), curve(0));
  EXPECT_EQ(MetricOf(*outs[1], "final_grad_norm"), MetricOf(*outs[0], "final_grad_norm"));
  EXPECT_NE(curve(3), curve(0));
  EXPECT_DOUBLE_EQ(MetricOf(*outs[3], "bitops_vs_fp32"), 16.0 / 1024);
  EXPECT_LT(curve(3).back(), curve(3).front());  // 4-bit training still learns
}

TEST_F(PrecisionRuns, BadSettingsAreRefusedByName) {
  const std::string base = std::string(R"(
device_model = "fixture.flops"
partitioner = "fixture.uniform"
[experiment]
name = "bad"
backend = "plan"
[cluster]
preset = "dgx-a100"
nodes = 1
[train]
global_batch = 64
micro_batch = 8
)") + kMlpModel;
  PlanBackend backend;
  auto one = [&](const std::string& arm) {
    auto outs = RunAll(base + "[[arm]]\nname = \"a\"\n" + arm + "\n", backend);
    EXPECT_EQ(outs.size(), 1u);
    EXPECT_FALSE(outs[0].ok());
    return std::string(outs[0].status().message());
  };
  // Out of the widths' range: refused when the file is resolved, at its key.
  EXPECT_THAT(one("precision_policy = { use = \"uniform\", bits = 64 }"),
              HasSubstr("precision_policy 'uniform': 'bits': expected int in [0, 32] (bits), got 64"));
  EXPECT_THAT(one("precision_policy = { use = \"uniform\", bits = 12 }"),
              HasSubstr("uniform: bits = 12 bits; expected 0 (the run's precision), 2 to 8, 16 or 32"));
  EXPECT_THAT(one("precision_policy = { use = \"uniform\", layer_bits = [\"block7.mlp=8\"] }"),
              HasSubstr("model 'mlp' has no layer 'block7.mlp' (its layers: dense0, dense1, classifier)"));
  EXPECT_THAT(one("precision_policy = { use = \"uniform\", layer_bits = [\"head\"] }"),
              HasSubstr("layer_bits entry \"head\"; expected \"layer=bits\""));
  EXPECT_THAT(one("precision_policy = { use = \"dpc\", ladder = [8, 9] }"), HasSubstr("ladder[1] = 9 bits"));
  EXPECT_THAT(one("precision_policy = { use = \"dpc\", keep = [\"conv9\"] }"), HasSubstr("has no layer 'conv9'"));
}

}  // namespace
}  // namespace testbed
