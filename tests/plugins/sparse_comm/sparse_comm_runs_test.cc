// EmbRace and TriRace in whole simulator runs (the built plugins, the real resolution code):
// every run's timeline passes the data audit ([sim] audit_data); sparse embedding
// communication (alone and with 2D scheduling) beats the dense all-reduce of a large table; TriRace beats PipeDream-2BW
// without its scheduling on a model whose table dominates; an LSTM language model and GNMT
// run end to end; bad input (a tied head, a text with more words than the vocabulary, fewer
// micro-batches than stages) is refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiment_runs.h"
#include "sim/sim_backend.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::MetricOf;

class SparseCommRuns : public testing::ExperimentRuns {};

// A GPT with a large untied table and little compute, on one HPWNV node (4 RTX 3090, PCIe).
std::string Experiment(const std::string& parallel, const std::string& arms, const std::string& extra = "") {
  return R"(
device_model = "roofline"
[experiment]
name = "sparse"
backend = "sim"
[cluster]
preset = "hpwnv"
[model]
name = "wide-vocab"
family = "gpt"
layers = 4
hidden = 512
heads = 8
seq_len = 64
vocab = 200000
tied_embeddings = false
[train]
global_batch = 32
micro_batch = 2
steps = 3
[sim]
audit_data = true
)" + extra + parallel + arms;
}

TEST_F(SparseCommRuns, EmbRaceRunsAuditedAndBeatsTheDenseAllReduce) {
  const std::string arms = R"(
[[arm]]
name = "horovod"
scheduler = { use = "1f1b", dp_bucket_mib = 64.0 }
[[arm]]
name = "alltoall"
scheduler = { use = "embrace", scheduling = "none" }
[[arm]]
name = "embrace"
scheduler = "embrace"
)";
  SimBackend backend;
  auto outs = RunAll(Experiment("[parallel]\ntp = 1\npp = 1\n", arms), backend);
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) {
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_GT(MetricOf(*o, "audited_data_dependencies"), 0);
  }
  const double horovod = MetricOf(*outs[0], "iteration_time_s");
  const double alltoall = MetricOf(*outs[1], "iteration_time_s");
  const double embrace = MetricOf(*outs[2], "iteration_time_s");
  // Sparse rows against the whole table, dense. (Whether 2D scheduling helps depends on the
  // dense share: it delays the dense buckets behind the input gradients; here the dense
  // layers' gradients dominate the wire. tests/sim/sparse_embedding_test.cc shows a case
  // where it wins.)
  EXPECT_LT(alltoall, horovod);
  EXPECT_LT(embrace, horovod);
}

TEST_F(SparseCommRuns, TriRaceRunsAuditedAndBeatsPipeDream2BW) {
  const std::string arms = R"(
[[arm]]
name = "megatron"
scheduler = "1f1b"
[[arm]]
name = "pipedream-2bw"
scheduler = "pipedream_2bw"
[[arm]]
name = "trirace"
scheduler = "trirace"
)";
  SimBackend backend;
  auto outs = RunAll(Experiment("[parallel]\ntp = 1\npp = 2\ndp = 2\n", arms), backend);
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) {
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_GT(MetricOf(*o, "audited_data_dependencies"), 0);
  }
  EXPECT_LT(MetricOf(*outs[2], "iteration_time_s"), MetricOf(*outs[1], "iteration_time_s"));
}

TEST_F(SparseCommRuns, LstmAndGnmtRunEndToEnd) {
  const std::string text = R"(
device_model = "calibrated"
[experiment]
name = "nlp"
backend = "sim"
[cluster]
preset = "hpwnv"
[model]
preset = "lstm-lm"
[train]
global_batch = 80
micro_batch = 20
steps = 2
[parallel]
tp = 1
pp = 1
[sim]
audit_data = true
[[point]]
name = "lstm"
"model.preset" = "lstm-lm"
[[point]]
name = "gnmt"
"model.preset" = "gnmt-8"
"train.global_batch" = 64
"train.micro_batch" = 16
[[arm]]
name = "embrace"
scheduler = "embrace"
)";
  SimBackend backend;
  auto outs = RunAll(text, backend);
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& o : outs) {
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_GT(MetricOf(*o, "throughput_samples_per_s"), 0);
  }
}

TEST_F(SparseCommRuns, BadInputIsRefusedByName) {
  SimBackend backend;
  // A tied head: its gradient touches every row.
  const std::string tied = R"(
[[arm]]
name = "embrace"
scheduler = "embrace"
model = { tied_embeddings = true }
)";
  auto t = RunAll(Experiment("[parallel]\ntp = 1\npp = 1\n", tied), backend);
  ASSERT_EQ(t.size(), 1u);
  ASSERT_FALSE(t[0].ok());
  EXPECT_THAT(std::string(t[0].status().message()), HasSubstr("tied_embeddings = false"));
  // The shipped text has more distinct words than a vocabulary of 100 rows.
  const std::string small = R"(
[[arm]]
name = "embrace"
scheduler = "embrace"
model = { vocab = 100 }
)";
  auto v = RunAll(Experiment("[parallel]\ntp = 1\npp = 1\n", small, "tokens = \"text\"\n"), backend);
  ASSERT_EQ(v.size(), 1u);
  ASSERT_FALSE(v[0].ok());
  EXPECT_THAT(std::string(v[0].status().message()), HasSubstr("distinct words, more than the model's vocabulary of 100"));
  // PipeDream-2BW (TriRace) needs at least as many micro-batches per iteration as stages.
  const std::string few = R"(
[[arm]]
name = "trirace"
scheduler = "trirace"
train = { global_batch = 4 }
)";
  auto f = RunAll(Experiment("[parallel]\ntp = 1\npp = 2\ndp = 2\n", few), backend);
  ASSERT_EQ(f.size(), 1u);
  ASSERT_FALSE(f[0].ok());
  EXPECT_THAT(std::string(f[0].status().message()), HasSubstr("m >= depth"));
}

}  // namespace
}  // namespace testbed
