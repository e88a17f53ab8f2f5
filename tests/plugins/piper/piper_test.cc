// Piper-style planner: the dynamic programme finds the split with the smallest largest stage
// load among those that fit (brute force), each stage recomputes only when that is needed to
// fit, and plans are valid.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>

#include "piper_partitioner.h"
#include "piper_planner.h"
#include "sim_fixtures.h"

namespace testbed::piper {
namespace {

Environment RandomEnvironment(std::mt19937& rng, int pp, double capacity) {
  Environment env;
  env.pp = pp;
  env.dp = 2;
  env.micro_batches = 2 + static_cast<int>(rng() % 8);
  env.send_s_per_byte.assign(static_cast<size_t>(pp), 1e-9);
  env.send_latency.assign(static_cast<size_t>(pp), 1e-6);
  env.allreduce_s_per_param.assign(static_cast<size_t>(pp), 1e-9);
  env.capacity_bytes.assign(static_cast<size_t>(pp), capacity);
  return env;
}

TEST(PiperPlanner, EqualsBruteForceUnderItsModel) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  int infeasible = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 9);
    const int pp = 1 + static_cast<int>(rng() % std::min(n, 4));
    std::vector<Unit> units(static_cast<size_t>(n));
    for (Unit& x : units) {
      x.fwd = u(rng);
      x.bwd = 2 * x.fwd;
      x.params = 1e6 * u(rng);
      x.activation = 1e8 * u(rng);
      x.checkpoint = 1e7;
      x.output_bytes = 1e6;
    }
    const Environment env = RandomEnvironment(rng, pp, 1e8 * (1 + static_cast<double>(rng() % 8)));
    double best = std::numeric_limits<double>::infinity();
    std::function<void(int, int, double)> go = [&](int start, int stage, double worst) {
      if (stage == pp - 1) {
        best = std::min(best, std::max(worst, CostStage(units, start, n, stage, env).load));
        return;
      }
      for (int end = start + 1; end <= n - (pp - 1 - stage); ++end) {
        go(end, stage + 1, std::max(worst, CostStage(units, start, end, stage, env).load));
      }
    };
    go(0, 0, 0);
    auto plan = PlanPiper(units, env);
    if (best == std::numeric_limits<double>::infinity()) {
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_NEAR(plan->max_load, best, 1e-12 * best) << trial;
    // Its own stages attain that load and each fits.
    int first = 0;
    double worst = 0;
    for (int s = 0; s < pp; ++s) {
      const StageChoice c = CostStage(units, first, first + plan->counts[static_cast<size_t>(s)], s, env);
      EXPECT_LT(c.load, std::numeric_limits<double>::infinity());
      EXPECT_EQ(c.recompute, plan->recompute[static_cast<size_t>(s)]);
      worst = std::max(worst, c.load);
      first += plan->counts[static_cast<size_t>(s)];
    }
    EXPECT_EQ(first, n);
    EXPECT_NEAR(worst, plan->max_load, 1e-12 * worst);
  }
  EXPECT_GT(infeasible, 0);
  EXPECT_LT(infeasible, 200);
}

TEST(PiperPlanner, RecomputesOnlyWhenItMustToFit) {
  std::vector<Unit> units(6, Unit{1.0, 2.0, 1e6, 1e8, 1e7, 1e6, 0, 0});
  std::mt19937 rng(2);
  Environment roomy = RandomEnvironment(rng, 3, 1e12);
  auto a = PlanPiper(units, roomy);
  ASSERT_TRUE(a.ok());
  for (bool r : a->recompute) EXPECT_FALSE(r);
  // Room for a stage's weights and a few micro-batches' inputs but not their activations.
  Environment tight = roomy;
  tight.capacity_bytes.assign(3, 16 * 2e6 + 1e8 + 10 * 2e7);
  auto b = PlanPiper(units, tight);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->recompute[0]);
}

TEST(PiperPartitioner, ReturnsValidPlans) {
  const ModelGraph model = testing::Gpt(12, 256, 128);
  const Cluster cluster = testing::StarCluster(8, 1e10, 1e-6);
  testing::ConstantDeviceModel dm(1e-3);
  TrainSettings train;
  train.micro_batches = 8;
  for (int pp : {1, 2, 4, 8}) {
    ParallelSettings parallel;
    parallel.pp = pp;
    PlanningContext ctx{model, cluster, train, parallel, dm, 1, {}};
    auto plan = PiperPartitioner(false).Partition(ctx);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(plan->Validate(static_cast<int>(model.layers.size()), cluster).ok());
  }
}

}  // namespace
}  // namespace testbed::piper
