// The light simulator against the full one: with constant layer times and free
// communication, 1F1B (whole or sliced micro-batches) over unequal stages ends and starts up at
// exactly the times the discrete-event simulator finds.
#include <gtest/gtest.h>

#include <random>

#include "micro_batch_slicer.h"
#include "program_timing.h"
#include "test_world.h"

namespace testbed::autopipe {
namespace {

TEST(ProgramTiming, MatchesTheFullSimulatorOnUnequalStages) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int pp = 2 + static_cast<int>(rng() % 5);
    std::vector<int> blocks(static_cast<size_t>(pp));
    int total = 0;
    for (int& b : blocks) total += (b = 1 + static_cast<int>(rng() % 4));
    const ModelGraph model = testing::Gpt(total, 256, 128);
    const int m = pp + static_cast<int>(rng() % (2 * pp));
    const int sliced = static_cast<int>(rng() % pp);
    const PipelineProgram program = SlicedOneFOneB(pp, m, sliced, 2);
    const Plan plan = PlanWithBlocks(model, blocks, m);
    OpCost cost = [&](int s, PipelineOp::Kind kind, double fraction) {
      const double f = 2 * blocks[static_cast<size_t>(s)] * kLayer * fraction;
      return kind == PipelineOp::Kind::kBackward ? 2 * f : f;
    };
    auto light = TimeProgram(program, cost);
    ASSERT_TRUE(light.ok());
    const FullSimResult full = SimulateFull(model, plan, testing::StarCluster(pp, 1e10, 1e-6), program);
    EXPECT_NEAR(light->end_s, full.iteration_s, 1e-12) << "trial " << trial;
    EXPECT_NEAR(light->startup_s, full.startup_s, 1e-12) << "trial " << trial;
  }
}

TEST(ProgramTiming, OneFOneBOverEqualStagesFollowsTheClosedForm) {
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m = 1; m <= 3 * pp; ++m) {
      OpCost cost = [](int, PipelineOp::Kind kind, double) { return kind == PipelineOp::Kind::kBackward ? 2.0 : 1.0; };
      auto t = TimeProgram(OneFOneBProgram(pp, m), cost);
      ASSERT_TRUE(t.ok());
      EXPECT_DOUBLE_EQ(t->end_s, (m + pp - 1) * 3.0);
      EXPECT_DOUBLE_EQ(t->startup_s, pp - 1.0);
    }
  }
}

TEST(ProgramTiming, ReportsADeadlock) {
  PipelineProgram p;
  // Stage 0 wants micro-batch 0's gradient before it has run the forward stage 1 needs.
  p.stages = {{{PipelineOp::Kind::kBackward, 0, 0}, {PipelineOp::Kind::kForward, 0, 0}},
              {{PipelineOp::Kind::kForward, 0, 0}, {PipelineOp::Kind::kBackward, 0, 0}}};
  OpCost cost = [](int, PipelineOp::Kind, double) { return 1.0; };
  EXPECT_EQ(TimeProgram(p, cost).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testbed::autopipe
