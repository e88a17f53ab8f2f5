// Whole simulated MoE runs with the built load balancers on one HPNV node (4 RTX 3090,
// expert parallelism over the four): every balancer runs, the balance figures are the
// table's, the balancers that copy experts even the load where DeepSpeed-MoE cannot, the
// simulated experts' tokens follow the placement; and bad settings are refused by name (a
// dense model, no expert parallelism, a trace of the wrong shape).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "experiment_runs.h"
#include "sim/sim_backend.h"
#include "testbed/routing_trace.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ColumnOf;
using testing::MetricOf;

class BalancerRuns : public testing::ExperimentRuns {
 protected:
  std::vector<absl::StatusOr<RunOutput>> Sim(const std::string& model, const std::string& arms,
                                             const std::string& parallel = "[parallel]\nep = 4\n") {
    const std::string text = std::string(R"(
[experiment]
name = "moe"
backend = "sim"
[cluster]
preset = "hpnv"
)") + model + R"(
[train]
micro_batch = 4
micro_batches = 2
steps = 4
)" + parallel + arms;
    SimBackend backend;
    return RunAll(text, backend);
  }
  static constexpr const char* kMoe = R"(
[model]
name = "moe-tiny"
family = "moe-gpt"
layers = 2
hidden = 512
ffn_hidden = 1024
heads = 8
seq_len = 1024
vocab = 8192
experts = 4
top_k = 1
)";
};

TEST_F(BalancerRuns, EveryBalancerRunsAndTheCopyingOnesEvenTheLoad) {
  const auto outs = Sim(kMoe, R"(
[[arm]]
name = "ds"
load_balancer = { use = "deepspeed_moe", skew = 1.5 }
[[arm]]
name = "faster"
load_balancer = { use = "fastermoe", skew = 1.5 }
[[arm]]
name = "pro"
load_balancer = { use = "pro_prophet", skew = 1.5 }
[[arm]]
name = "prophet"
load_balancer = { use = "prophet", skew = 1.5 }
)");
  ASSERT_EQ(outs.size(), 4u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  const RunOutput &ds = *outs[0], &faster = *outs[1], &pro = *outs[2], &prophet = *outs[3];
  EXPECT_DOUBLE_EQ(MetricOf(ds, "routing_synthetic"), 1);
  // The same routing in every arm: the degree before balancing is the same.
  const double before = MetricOf(ds, "balance_degree_before");
  ASSERT_GT(before, 0);
  for (const RunOutput* o : {&faster, &pro, &prophet}) EXPECT_DOUBLE_EQ(MetricOf(*o, "balance_degree_before"), before);
  // DeepSpeed-MoE changes nothing; the others copy experts and lower the degree.
  EXPECT_DOUBLE_EQ(MetricOf(ds, "balance_degree_after"), before);
  EXPECT_DOUBLE_EQ(MetricOf(ds, "expert_copies_per_layer"), 0);
  for (const RunOutput* o : {&faster, &pro, &prophet}) {
    EXPECT_GT(MetricOf(*o, "expert_copies_per_layer"), 0);
    EXPECT_LT(MetricOf(*o, "balance_degree_after"), before);
    EXPECT_GT(MetricOf(*o, "balance_ratio"), 1);
  }
  // The table: one row per iteration and MoE layer, its mean the metric.
  const auto after = ColumnOf<double>(pro, "moe_balance", "balance_degree_after");
  ASSERT_EQ(after.size(), 4u * 2u);
  EXPECT_NEAR(std::accumulate(after.begin(), after.end(), 0.0) / 8, MetricOf(pro, "balance_degree_after"), 1e-9);
  // Balancing shortens the simulated iteration on a skewed routing.
  EXPECT_LT(MetricOf(pro, "iteration_time_s"), MetricOf(ds, "iteration_time_s"));
}

TEST_F(BalancerRuns, EvenRoutingNeedsNoCopies) {
  const auto outs = Sim(kMoe, R"(
[[arm]]
name = "pro"
load_balancer = { use = "pro_prophet", routing = "even" }
)");
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  EXPECT_DOUBLE_EQ(MetricOf(*outs[0], "expert_copies_per_layer"), 0);
  EXPECT_DOUBLE_EQ(MetricOf(*outs[0], "balance_degree_before"), 0);
}

TEST_F(BalancerRuns, ATraceDrivesTheRoutingAndItsShapeIsChecked) {
  // Every token of every rank to expert 0 in both MoE layers, four iterations.
  RoutingTrace t;
  t.iterations = 4;
  t.layers = 2;
  t.ranks = 4;
  t.experts = 4;
  t.tokens.assign(4 * 2 * 4 * 4, 0.0);
  for (int i = 0; i < 4 * 2 * 4; ++i) t.tokens[static_cast<size_t>(i) * 4] = 1024;
  const auto path = dir_.path() / "hot.h5";
  ASSERT_TRUE(WriteRoutingTrace(path, t).ok());
  const auto outs = Sim(kMoe, "[[arm]]\nname = \"ds\"\nload_balancer = { use = \"deepspeed_moe\", routing = \"" +
                                  path.string() + "\" }\n");
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  // Rank 0 computes all 4 x 1024 tokens, the others none: mean 1024, deviations 3072 and
  // three of -1024, so the degree is sqrt((3072^2 + 3 x 1024^2) / 4) = 1024 sqrt(3).
  const double dev = 1024 * std::sqrt(3.0);
  EXPECT_NEAR(MetricOf(*outs[0], "balance_degree_before"), dev, 1e-6);
  EXPECT_DOUBLE_EQ(MetricOf(*outs[0], "routing_traced"), 1);
  EXPECT_DOUBLE_EQ(MetricOf(*outs[0], "routing_synthetic"), 0);
  // Ranks whose experts get no token cost nothing there, with either device model.
  const auto calibrated = Sim(kMoe, "[[arm]]\nname = \"ds\"\ndevice_model = \"calibrated\"\nload_balancer = { use = "
                                    "\"deepspeed_moe\", routing = \"" + path.string() + "\" }\n");
  ASSERT_TRUE(calibrated[0].ok()) << calibrated[0].status();
  EXPECT_GT(MetricOf(*calibrated[0], "moe_layer_time_s"), 0);
  // A trace for 8 ranks does not fit four.
  t.ranks = 8;
  t.tokens.assign(4 * 2 * 8 * 4, 1.0);
  ASSERT_TRUE(WriteRoutingTrace(path, t).ok());
  const auto bad = Sim(kMoe, "[[arm]]\nname = \"ds\"\nload_balancer = { use = \"deepspeed_moe\", routing = \"" +
                                 path.string() + "\" }\n");
  ASSERT_FALSE(bad[0].ok());
  EXPECT_THAT(bad[0].status().message(), HasSubstr("hot.h5, dataset \"tokens\": shape 4 x 2 x 8 x 4"));
  EXPECT_THAT(bad[0].status().message(), HasSubstr("4 expert-parallel ranks"));
}

TEST_F(BalancerRuns, BadSettingsAreNamed) {
  const auto dense = Sim(R"(
[model]
name = "gpt-tiny"
family = "gpt"
layers = 2
hidden = 512
heads = 8
seq_len = 1024
vocab = 8192
)", "[[arm]]\nname = \"x\"\nload_balancer = \"pro_prophet\"\n");
  ASSERT_FALSE(dense[0].ok());
  EXPECT_THAT(dense[0].status().message(), HasSubstr("a load balancer needs a MoE model"));
  const auto no_ep = Sim(kMoe, "[[arm]]\nname = \"x\"\nload_balancer = \"fastermoe\"\n", "[parallel]\nep = 1\n");
  ASSERT_FALSE(no_ep[0].ok());
  EXPECT_THAT(no_ep[0].status().message(), HasSubstr("set [parallel] ep"));
  const auto missing = Sim(kMoe, "[[arm]]\nname = \"x\"\nload_balancer = { use = \"prophet\", routing = \"nope.h5\" }\n");
  ASSERT_FALSE(missing[0].ok());
  EXPECT_THAT(missing[0].status().message(), HasSubstr("nope.h5: no such routing trace file"));
}

}  // namespace
}  // namespace testbed
