// Real MoE-GPT training (exec/moe_training.h) through the built load balancers: expert
// parallelism over four ranks gives single-process training's losses step by step, with and
// without a balancer's copies; the measured routing is written as a routing trace of the
// documented shape, whose counts add up to the tokens routed, and a simulated run replays it;
// bad settings are refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/real_backend.h"
#include "experiment_runs.h"
#include "sim/sim_backend.h"
#include "testbed/routing_trace.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ColumnOf;
using testing::MetricOf;

// The tiny MoE-GPT of these runs, real and replayed.
std::string TinyMoe(int top_k) {
  return std::string(R"(
[model]
name = "moe-tiny"
family = "moe-gpt"
layers = 2
hidden = 32
ffn_hidden = 64
heads = 4
seq_len = 16
vocab = 256
experts = 4
top_k = )") + std::to_string(top_k) + "\n";
}

class MoeRealRuns : public testing::ExperimentRuns {
 protected:
  std::vector<absl::StatusOr<RunOutput>> Real(const std::string& arms, int top_k = 1) {
    const std::string text = std::string(R"(
communicator = "local"
[experiment]
name = "moe-real"
backend = "real"
)") + TinyMoe(top_k) + R"(
[train]
global_batch = 8
micro_batch = 1
steps = 6
optimizer = "adam"
learning_rate = 3e-3
precision = "fp32"
[data]
dataset = "text"
[parallel]
dp = 4
ep = 4
)" + arms;
    RealBackend backend;
    return RunAll(text, backend);
  }
};

void ExpectSameLosses(const RunOutput& got, const RunOutput& want, const std::string& what) {
  const auto a = ColumnOf<double>(got, "loss_curve", "loss"), b = ColumnOf<double>(want, "loss_curve", "loss");
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 2e-5 * b[i]) << what << ", step " << i;
}

TEST_F(MoeRealRuns, ExpertParallelismEqualsSingleProcessWithAndWithoutCopies) {
  for (int top_k : {1, 2}) {
    const auto outs = Real(R"(
[[arm]]
name = "single"
parallel = { dp = 1, ep = 1 }
"train.micro_batch" = 4
[[arm]]
name = "ep4"
[[arm]]
name = "pro"
load_balancer = { use = "pro_prophet", trans_gbps = 10000 }
[[arm]]
name = "faster"
load_balancer = { use = "fastermoe", net_gbps = 10000 }
)", top_k);
    ASSERT_EQ(outs.size(), 4u);
    for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
    const std::string k = "top-" + std::to_string(top_k);
    ExpectSameLosses(*outs[1], *outs[0], k + " expert parallelism");
    ExpectSameLosses(*outs[2], *outs[0], k + " with Pro-Prophet's copies");
    ExpectSameLosses(*outs[3], *outs[0], k + " with FasterMoE's shadows");
    // The balancers did place copies (their constants scaled to this model's tiny experts), and
    // Pro-Prophet's load is more even.
    EXPECT_GT(MetricOf(*outs[2], "expert_copies_per_layer"), 0) << k;
    EXPECT_GT(MetricOf(*outs[3], "expert_copies_per_layer"), 0) << k;
    EXPECT_DOUBLE_EQ(MetricOf(*outs[1], "expert_copies_per_layer"), 0) << k;
    EXPECT_LT(MetricOf(*outs[2], "measured_balance_degree"), MetricOf(*outs[1], "measured_balance_degree")) << k;
    EXPECT_LT(outs[0]->metrics.Find("final_loss")->value, outs[0]->metrics.Find("first_loss")->value) << k;
  }
}

TEST_F(MoeRealRuns, TheMeasuredRoutingIsATraceASimulatedRunReplays) {
  const auto path = dir_.path() / "routing.h5";
  const auto outs = Real("[[arm]]\nname = \"ep4\"\n\"real.routing_trace\" = \"" + path.string() + "\"\n", 2);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  auto trace = ReadRoutingTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->iterations, 6);
  EXPECT_EQ(trace->layers, 2);
  EXPECT_EQ(trace->ranks, 4);
  EXPECT_EQ(trace->experts, 4);
  // Each rank routes its micro-batch's 16 tokens to two experts each, per layer and iteration.
  for (int it = 0; it < 6; ++it) {
    for (int l = 0; l < 2; ++l) {
      const Routing r = trace->Slice(it, l);
      for (int rank = 0; rank < 4; ++rank) {
        double sum = 0;
        for (int e = 0; e < 4; ++e) sum += r.At(rank, e);
        EXPECT_DOUBLE_EQ(sum, 2 * 16) << "iteration " << it << ", layer " << l << ", rank " << rank;
      }
    }
  }
  // Replayed in the simulator with the same shape on four devices.
  const std::string sim = R"(
[experiment]
name = "replay"
backend = "sim"
[cluster]
preset = "hpnv"
)" + TinyMoe(2) + R"(
[train]
micro_batch = 1
micro_batches = 2
steps = 6
[parallel]
ep = 4
[[arm]]
name = "ds"
load_balancer = { use = "deepspeed_moe", routing = ")" + path.string() + "\" }\n";
  SimBackend backend;
  const auto replay = RunAll(sim, backend);
  ASSERT_TRUE(replay[0].ok()) << replay[0].status();
  EXPECT_DOUBLE_EQ(MetricOf(*replay[0], "routing_traced"), 1);
  EXPECT_GT(MetricOf(*replay[0], "balance_degree_before"), 0);
}

TEST_F(MoeRealRuns, BadSettingsAreNamed) {
  const auto half = Real("[[arm]]\nname = \"x\"\n\"parallel.ep\" = 2\n");
  ASSERT_FALSE(half[0].ok());
  EXPECT_THAT(half[0].status().message(), HasSubstr("ep = 2: real training runs expert parallelism over all"));
  const auto no_ep = Real("[[arm]]\nname = \"x\"\n\"parallel.ep\" = 1\nload_balancer = \"pro_prophet\"\n");
  ASSERT_FALSE(no_ep[0].ok());
  EXPECT_THAT(no_ep[0].status().message(), HasSubstr("a load balancer needs expert parallelism"));
  const auto capped = Real("[[arm]]\nname = \"x\"\nload_balancer = { use = \"fastermoe\", capacity_factor = 1.25 }\n");
  ASSERT_FALSE(capped[0].ok());
  EXPECT_THAT(capped[0].status().message(), HasSubstr("capacity_factor = 1.25; real training runs dropless"));
}

}  // namespace
}  // namespace testbed
