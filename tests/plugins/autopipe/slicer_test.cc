// The micro-batch slicer never makes the simulated iteration slower than 1F1B (beyond the
// 1e-9 it treats as a tie), and when it
// slices, the pipeline starts up sooner; over equal stages, halving the first micro-batch
// halves the start-up (AutoPipe's headline: -50%).
#include <gtest/gtest.h>

#include <random>

#include "micro_batch_slicer.h"
#include "slicer_scheduler.h"
#include "test_world.h"

namespace testbed::autopipe {
namespace {

PipelineProgram SlicerProgram(const ModelGraph& model, const Plan& plan, const Cluster& cluster, int parts = 2) {
  TrainSettings train;
  testing::ConstantDeviceModel dm(kLayer);
  SchedulingContext ctx{model, cluster, plan, train, dm};
  SlicerScheduler slicer(ExpandOptions{}, -1, parts);
  auto program = slicer.Program(ctx, static_cast<int>(plan.MicroBatches(0, 0)));
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

TEST(MicroBatchSlicer, NeverIncreasesTheSimulatedIterationTime) {
  std::mt19937 rng(5);
  int sliced_runs = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int pp = 2 + static_cast<int>(rng() % 6);
    std::vector<int> blocks(static_cast<size_t>(pp));
    int total = 0;
    for (int& b : blocks) total += (b = 1 + static_cast<int>(rng() % 3));
    const ModelGraph model = testing::Gpt(total, 256, 128);
    const int m = pp + static_cast<int>(rng() % (3 * pp));
    const Plan plan = PlanWithBlocks(model, blocks, m);
    // Links fast enough that the slicer's transfer estimate is nil, as in the free simulation.
    const Cluster cluster = testing::StarCluster(pp, 1e18, 0);
    const PipelineProgram sliced = SlicerProgram(model, plan, cluster);
    const FullSimResult a = SimulateFull(model, plan, cluster, sliced);
    const FullSimResult b = SimulateFull(model, plan, cluster, OneFOneBProgram(pp, m));
    EXPECT_LE(a.iteration_s, b.iteration_s * (1 + 1e-8)) << "trial " << trial;
    if (!sliced.micro_batch_fraction.empty()) {
      ++sliced_runs;
      EXPECT_LT(a.startup_s, b.startup_s) << "trial " << trial;
    }
  }
  EXPECT_GT(sliced_runs, 0);
}

TEST(MicroBatchSlicer, HalvesTheStartUpOverEqualStages) {
  for (int pp : {2, 4, 8}) {
    const ModelGraph model = testing::Gpt(2 * pp, 256, 128);
    const Plan plan = PlanWithBlocks(model, std::vector<int>(static_cast<size_t>(pp), 2), 2 * pp);
    const Cluster cluster = testing::StarCluster(pp, 1e18, 0);
    const PipelineProgram sliced = SlicerProgram(model, plan, cluster);
    ASSERT_FALSE(sliced.micro_batch_fraction.empty()) << "pp=" << pp;
    const FullSimResult a = SimulateFull(model, plan, cluster, sliced);
    const FullSimResult b = SimulateFull(model, plan, cluster, OneFOneBProgram(pp, 2 * pp));
    EXPECT_NEAR(a.startup_s, 0.5 * b.startup_s, 1e-12) << "pp=" << pp;
    EXPECT_LE(a.iteration_s, b.iteration_s * (1 + 1e-8));
  }
}

TEST(MicroBatchSlicer, SlicedProgramKeepsEverySample) {
  const PipelineProgram p = SlicedOneFOneB(4, 8, 3, 2);
  EXPECT_EQ(p.NumMicroBatches(), 11);
  double samples = 0;
  for (double f : p.micro_batch_fraction) samples += f;
  EXPECT_DOUBLE_EQ(samples, 8.0);
  EXPECT_TRUE(CheckProgram(p, 4, 1, 11).ok());
  EXPECT_TRUE(SlicedOneFOneB(4, 8, 0, 2).micro_batch_fraction.empty());
}

}  // namespace
}  // namespace testbed::autopipe
