// The features the simulator models and the training engine does not (SwiGLU, FlashAttention,
// rotary positions, grouped-query attention, FP8, context parallelism) are refused by real
// runs, each naming its key, before anything is trained; the plain model trains.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/real_backend.h"
#include "experiment_runs.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

class SimulatedOnlyRuns : public testing::ExperimentRuns {};

constexpr const char* kTiny = R"(
communicator = "local"
[experiment]
name = "simulated-only"
backend = "real"
timeline = "off"
[real]
predict = false
check_against_single = false
[data]
dataset = "text"
[model]
name = "tiny"
family = "gpt"
layers = 1
hidden = 32
heads = 4
seq_len = 16
vocab = 256
[train]
global_batch = 4
micro_batch = 2
steps = 1
optimizer = "adam"
learning_rate = 0.003
precision = "fp32"
)";

TEST_F(SimulatedOnlyRuns, EachIsRefusedByItsKey) {
  const std::string arms = R"(
[[arm]]
name = "plain"
[[arm]]
name = "swiglu"
model = { ffn = "swiglu" }
[[arm]]
name = "flash"
model = { attention = "flash" }
[[arm]]
name = "rope"
model = { positions = "rope" }
[[arm]]
name = "gqa"
model = { kv_heads = 2 }
[[arm]]
name = "fp8"
train = { precision = "fp8" }
[[arm]]
name = "cp2"
parallel = { cp = 2, dp = 1 }
)";
  RealBackend backend;
  auto outs = RunAll(std::string(kTiny) + arms, backend);
  ASSERT_EQ(outs.size(), 7u);
  ASSERT_TRUE(outs[0].ok()) << outs[0].status();
  const char* expected[] = {"[model] ffn = \"swiglu\"", "[model] attention = \"flash\"",
                            "[model] positions = \"rope\"", "[model] kv_heads = 2", "[train] precision = \"fp8\"",
                            "[parallel] cp = 2"};
  for (size_t i = 1; i < outs.size(); ++i) {
    ASSERT_FALSE(outs[i].ok()) << "arm " << i;
    EXPECT_EQ(outs[i].status().code(), absl::StatusCode::kUnimplemented) << outs[i].status();
    EXPECT_THAT(std::string(outs[i].status().message()), HasSubstr(expected[i - 1]));
  }
}

}  // namespace
}  // namespace testbed
