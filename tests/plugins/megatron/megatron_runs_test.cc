// Whole runs of the Megatron-LM baseline's Megatron-Core options on two DGX A100 nodes: the
// distributed optimizer is ZeRO-1 (same time and memory as [parallel] zero_stage = 1, less
// memory than without); tp_comm_overlap is one chunk per TP rank, joined and costed as shares,
// and hides collectives the blocking schedule exposes; overlapped weight gathers are faster over two steps; the uneven split
// puts the counts asked for on the first and last stages (planned), and a split Megatron-Core
// refuses is refused by name; interleaving runs micro-batch counts that are not multiples of
// the depth in Megatron-Core's groups, and refuses groups it refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiment_runs.h"
#include "engine/plan_backend.h"
#include "sim/sim_backend.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ColumnOf;
using testing::MetricOf;

class MegatronRuns : public testing::ExperimentRuns {
 protected:
  std::vector<absl::StatusOr<RunOutput>> Sim(const std::string& parallel, const std::string& arms,
                                             const std::string& steps = "1") {
    SimBackend backend;
    return RunAll(Text("sim", parallel, arms, steps), backend);
  }
  std::vector<absl::StatusOr<RunOutput>> Planned(const std::string& parallel, const std::string& arms) {
    PlanBackend backend;
    return RunAll(Text("plan", parallel, arms, "1"), backend);
  }
  static std::string Text(const std::string& backend, const std::string& parallel, const std::string& arms,
                          const std::string& steps) {
    return R"(
device_model = "roofline"
[experiment]
name = "megatron-core"
backend = ")" + backend + "\"\n" + (backend == "sim" ? "timeline = \"off\"\n" : "") + R"(
[cluster]
preset = "dgx-a100"
nodes = 2
[model]
preset = "gpt-1.5b"
[train]
global_batch = 64
micro_batch = 2
steps = )" + steps + "\n" + parallel + arms;
  }
};

TEST_F(MegatronRuns, DistributedOptimizerIsZeroOneAndSavesMemory) {
  auto outs = Sim(R"(
[parallel]
tp = 2
pp = 2
)",
                  R"(
[[arm]]
name = "plain"
partitioner = "megatron.uniform"
scheduler = "1f1b"
[[arm]]
name = "distributed"
partitioner = { use = "megatron.uniform", distributed_optimizer = true }
scheduler = "1f1b"
[[arm]]
name = "zero1"
partitioner = "megatron.uniform"
scheduler = "1f1b"
parallel = { zero_stage = 1 }
)");
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_LT(MetricOf(*outs[1], "memory_peak_gib"), MetricOf(*outs[0], "memory_peak_gib"));
  EXPECT_DOUBLE_EQ(MetricOf(*outs[1], "memory_peak_gib"), MetricOf(*outs[2], "memory_peak_gib"));
  EXPECT_DOUBLE_EQ(MetricOf(*outs[1], "iteration_time_s"), MetricOf(*outs[2], "iteration_time_s"));
}

TEST_F(MegatronRuns, TpCommOverlapIsOneChunkPerRankJoinedCostedAsSharesAndFaster) {
  auto outs = Sim(R"(
[parallel]
tp = 8
pp = 1
sequence_parallel = true
)",
                  R"(
[[arm]]
name = "blocking"
partitioner = "megatron.uniform"
scheduler = "1f1b"
[[arm]]
name = "tp-comm-overlap"
partitioner = "megatron.uniform"
scheduler = { use = "1f1b", tp_comm_overlap = true }
[[arm]]
name = "by-hand"
partitioner = "megatron.uniform"
scheduler = { use = "1f1b", tp_chunks = 8, tp_overlap = true, tp_chunk_join = true, tp_chunk_time_share = true }
)");
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_LT(MetricOf(*outs[1], "iteration_time_s"), MetricOf(*outs[0], "iteration_time_s"));
  EXPECT_LT(MetricOf(*outs[1], "exposed_comm_s"), MetricOf(*outs[0], "exposed_comm_s"));
  EXPECT_DOUBLE_EQ(MetricOf(*outs[1], "iteration_time_s"), MetricOf(*outs[2], "iteration_time_s"));
}

TEST_F(MegatronRuns, OverlappedWeightGathersShortenTheSecondStep) {
  auto outs = Sim(R"(
[parallel]
tp = 1
pp = 1
zero_stage = 1
)",
                  R"(
[[arm]]
name = "gather-in-step"
partitioner = "megatron.uniform"
scheduler = "1f1b"
[[arm]]
name = "overlap-param-gather"
partitioner = "megatron.uniform"
scheduler = { use = "1f1b", param_gather_overlap = true }
)",
                  "2");
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& o : outs) ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_LT(MetricOf(*outs[1], "iteration_time_s"), MetricOf(*outs[0], "iteration_time_s"));
  // The first step has no gather before it either way; the gathers of the second overlap its forward.
  const std::vector<double> a = ColumnOf<double>(*outs[0], "per_step", "time_s");
  const std::vector<double> b = ColumnOf<double>(*outs[1], "per_step", "time_s");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_LT(b[1], a[1]);
}

TEST_F(MegatronRuns, UnevenStagesHoldTheCountsAskedFor) {
  // gpt-1.5b has 48 blocks; first 6 and last 6 leave 36 for the 2 middle stages.
  auto outs = Planned(R"(
[parallel]
tp = 4
pp = 4
)",
                  R"(
[[arm]]
name = "uneven"
partitioner = { use = "megatron.uniform", first_stage_blocks = 6, last_stage_blocks = 6 }
[[arm]]
name = "refused"
partitioner = { use = "megatron.uniform", first_stage_blocks = 5 }
)");
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  const std::vector<std::int64_t> layers = ColumnOf<std::int64_t>(*outs[0], "stages", "layers");
  ASSERT_EQ(layers.size(), 4u);
  // Layers, not blocks: two per block, plus the embedding first and the head last.
  EXPECT_EQ(layers, (std::vector<std::int64_t>{6 * 2 + 1, 18 * 2, 18 * 2, 6 * 2 + 1}));
  ASSERT_FALSE(outs[1].ok());
  EXPECT_THAT(outs[1].status().message(), HasSubstr("leave 43 for the other 3 pipeline stages"));
}

TEST_F(MegatronRuns, InterleavingRunsMicroBatchCountsThatAreNotMultiplesOfTheDepth) {
  // TP 2 x PP 4 x DP 2: 72 sequences of 2 per step are 18 micro-batches per replica; by default
  // in Megatron-Core's groups of 6 (the smallest that leaves no last group of 1 to 3), or of 9
  // as asked; groups of 4 leave a last group of 2, refused as Megatron-Core refuses it.
  auto outs = Sim(R"(
[parallel]
tp = 2
pp = 4
virtual_stages = 2
)",
                  R"(
[[arm]]
name = "multiple"
partitioner = "megatron.uniform"
scheduler = "interleaved_1f1b"
[[arm]]
name = "default-group"
partitioner = "megatron.uniform"
scheduler = "interleaved_1f1b"
train.global_batch = 72
[[arm]]
name = "groups-of-9"
partitioner = "megatron.uniform"
scheduler = { use = "interleaved_1f1b", microbatch_group = 9 }
train.global_batch = 72
[[arm]]
name = "groups-of-4"
partitioner = "megatron.uniform"
scheduler = { use = "interleaved_1f1b", microbatch_group = 4 }
train.global_batch = 72
)");
  ASSERT_EQ(outs.size(), 4u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(outs[static_cast<size_t>(i)].ok()) << outs[static_cast<size_t>(i)].status();
  const double t16 = MetricOf(*outs[0], "iteration_time_s"), t18 = MetricOf(*outs[1], "iteration_time_s");
  // Two more micro-batches of the same work: longer, by less than their share plus the bubble.
  EXPECT_GT(t18, t16);
  EXPECT_LT(t18, t16 * 18.0 / 16.0 * 1.1);
  EXPECT_GT(MetricOf(*outs[2], "iteration_time_s"), 0);
  ASSERT_FALSE(outs[3].ok());
  EXPECT_THAT(outs[3].status().message(), HasSubstr("leave a last group of 2, fewer than the pipeline depth (4)"));
}

}  // namespace
}  // namespace testbed
