// DAPPLE-style planner: over equal stages the latency model is 1F1B's closed form; the pivot
// is the stage whose steady phase plus the path to it is longest; with two stages the
// recursive split is exhaustive, so it equals brute force; plans are valid and cut only
// between whole layers.
#include <gtest/gtest.h>

#include <random>

#include "dapple_latency.h"
#include "dapple_partitioner.h"
#include "dapple_planner.h"
#include "sim_fixtures.h"
#include "testbed/plan_search.h"

namespace testbed::dapple {
namespace {

TEST(DappleLatency, EqualStagesFollowOneFOneB) {
  for (int s = 1; s <= 8; ++s) {
    for (int m = 1; m <= 16; ++m) {
      const std::vector<StageLoad> st(static_cast<size_t>(s), StageLoad{1.0, 2.0, 0, 0});
      const Latency l = PipelineLatency(st, m);
      EXPECT_DOUBLE_EQ(l.seconds, (m + s - 1) * 3.0);
      EXPECT_EQ(l.pivot, s - 1);
    }
  }
}

TEST(DappleLatency, PivotMaximisesPathThroughItsSteadyPhase) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(0.5, 3.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int s = 1 + static_cast<int>(rng() % 8);
    const int m = 1 + static_cast<int>(rng() % 20);
    std::vector<StageLoad> st(static_cast<size_t>(s));
    for (StageLoad& x : st) x = {u(rng), 2 * u(rng), 0, 0};
    // g(Q) = sum_{j<=Q}(F_j + B_j) + (M-1)(F_Q + B_Q); the pivot is its last maximiser.
    double best = -1;
    for (int q = 0; q < s; ++q) {
      double g = 0;
      for (int j = 0; j <= q; ++j) g += st[static_cast<size_t>(j)].f + st[static_cast<size_t>(j)].b;
      g += (m - 1) * (st[static_cast<size_t>(q)].f + st[static_cast<size_t>(q)].b);
      best = std::max(best, g);
    }
    EXPECT_NEAR(PipelineLatency(st, m).seconds, best, 1e-9 * best) << trial;
  }
}

TEST(DapplePlanner, TwoStagesEqualBruteForce) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 12);
    UnitCosts units;
    for (int i = 0; i < n; ++i) {
      units.fwd.push_back(u(rng));
      units.bwd.push_back(2 * u(rng));
      units.params.push_back(1e6 * u(rng));
      units.output_bytes.push_back(1e6);
    }
    StageEnvironment env{{1e-9}, {1e-6}, {1e-9, 2e-9}};
    const int m = 1 + static_cast<int>(rng() % 8);
    auto plan = PlanDapple(units, 2, m, env);
    ASSERT_TRUE(plan.ok());
    double best = 1e300;
    for (int cut = 1; cut < n; ++cut) {
      best = std::min(best, PipelineLatency(LoadsOf(units, {cut, n - cut}, env), m).seconds);
    }
    EXPECT_NEAR(plan->latency.seconds, best, 1e-12 * best) << trial;
  }
}

TEST(DapplePartitioner, ReturnsValidPlansCutBetweenWholeLayers) {
  const ModelGraph model = testing::Gpt(12, 256, 128);
  const Cluster cluster = testing::StarCluster(8, 1e10, 1e-6);
  testing::ConstantDeviceModel dm(1e-3);
  TrainSettings train;
  train.micro_batches = 8;
  const std::vector<int> units = UnitBoundaries(model);
  for (int pp : {1, 2, 4, 8}) {
    ParallelSettings parallel;
    parallel.pp = pp;
    PlanningContext ctx{model, cluster, train, parallel, dm, 1, {}};
    auto plan = DapplePartitioner(false).Partition(ctx);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(plan->Validate(static_cast<int>(model.layers.size()), cluster).ok());
    for (const StageSpec& st : plan->Chunks()) {
      EXPECT_TRUE(std::binary_search(units.begin(), units.end(), st.first_layer));
      EXPECT_TRUE(std::binary_search(units.begin(), units.end(), st.end_layer));
    }
  }
}

}  // namespace
}  // namespace testbed::dapple
