// Stage-aware recomputation against the paper's formula r_k = 1 - (1 - r0)(P - 1)/(P - 1 - k)
// (clamped at 0; the last stage none), and the layer counts that realise a ratio.
#include <gtest/gtest.h>

#include <algorithm>

#include "stage_aware_recompute.h"

namespace testbed::merak {
namespace {

TEST(StageAwareRecompute, RatiosFollowThePapersFormula) {
  for (int pp = 1; pp <= 16; ++pp) {
    for (double r0 : {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0}) {
      const std::vector<double> r = StageAwareRatios(r0, pp);
      ASSERT_EQ(static_cast<int>(r.size()), pp);
      for (int k = 0; k + 1 < pp; ++k) {
        const double want = std::max(0.0, 1.0 - (1.0 - r0) * (pp - 1.0) / (pp - 1.0 - k));
        EXPECT_NEAR(r[static_cast<size_t>(k)], want, 1e-15) << "pp=" << pp << " r0=" << r0 << " k=" << k;
      }
      EXPECT_EQ(r.back(), 0.0);  // the last stage never recomputes
      if (pp > 1) {
        EXPECT_NEAR(r.front(), r0, 1e-15);
      }
      EXPECT_TRUE(std::is_sorted(r.rbegin(), r.rend())) << "ratios must not grow towards the last stage";
    }
  }
}

TEST(StageAwareRecompute, MemoryOfTheRatiosMatchesTheFirstStage) {
  // The formula is the one that equalises (P - 1 - k)(1 - r_k), the share of un-recomputed
  // activations stage k keeps for the micro-batches it holds besides the one in backward.
  for (int pp = 2; pp <= 12; ++pp) {
    for (double r0 : {0.3, 0.6, 0.95}) {
      const std::vector<double> r = StageAwareRatios(r0, pp);
      for (int k = 0; k + 1 < pp; ++k) {
        if (r[static_cast<size_t>(k)] <= 0) continue;  // clamped: spare memory left unused
        EXPECT_NEAR((pp - 1 - k) * (1 - r[static_cast<size_t>(k)]), (pp - 1) * (1 - r0), 1e-12);
      }
    }
  }
}

TEST(StageAwareRecompute, LayerCountIsTheSmallestThatCoversTheRatio) {
  for (int n = 1; n <= 40; ++n) {
    for (int i = 0; i <= 100; ++i) {
      const double r = i / 100.0;
      const int k = RecomputeLayers(r, n);
      EXPECT_GE(k / static_cast<double>(n), r - 1e-9) << n << " " << r;
      if (k > 0) {
        EXPECT_LT((k - 1) / static_cast<double>(n), r - 1e-12) << n << " " << r;
      }
    }
    for (int k = 0; k <= n; ++k) EXPECT_EQ(RecomputeLayers(static_cast<double>(k) / n, n), k);
  }
}

TEST(StageAwareRecompute, ShiftedScheduleGivesStageBeforeLastTheRatioOfTheOneBefore) {
  std::vector<double> r = StageAwareRatios(0.9, 6);
  const double before = r[3];
  ShiftAdjust(r);
  EXPECT_EQ(r[4], before);
  std::vector<double> two = StageAwareRatios(0.9, 2);
  ShiftAdjust(two);
  EXPECT_EQ(two, StageAwareRatios(0.9, 2));  // nothing before stage P-2 when P = 2
}

TEST(StageAwareRecompute, ApplyRatiosSetsLayersPerStage) {
  GridSpec g;
  g.pp = 3;
  g.chunks = {{0, 10, 0}, {10, 18, 0}, {18, 20, 0}};
  Plan plan = GridPlan(g);
  ApplyRatios(plan, {0.5, 0.25, 0.0});
  EXPECT_EQ(plan.Chunks()[0].recompute_layers, 5);
  EXPECT_EQ(plan.Chunks()[1].recompute_layers, 2);
  EXPECT_EQ(plan.Chunks()[2].recompute_layers, 0);
  EXPECT_EQ(plan.recompute, RecomputeMode::kFull);
  ApplyRatios(plan, {0.0, 0.0, 0.0});
  EXPECT_EQ(plan.recompute, RecomputeMode::kNone);
}

}  // namespace
}  // namespace testbed::merak
