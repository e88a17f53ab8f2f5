// AutoPipe's heuristic search never returns a partition slower (in its 1F1B simulation) than
// the dynamic programme's it starts from, and its partitions are valid splits.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "balanced_partition.h"

namespace testbed::autopipe {
namespace {

TEST(BalancedPartition, HeuristicIsNeverWorseThanTheDynamicProgramme) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.2, 3.0);
  int improved = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 4 + static_cast<int>(rng() % 40);
    const int stages = 2 + static_cast<int>(rng() % std::min(n - 1, 12));
    std::vector<double> f(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      f[static_cast<size_t>(i)] = u(rng);
      // Backward about twice forward, but not exactly: the ratio shapes the critical path.
      b[static_cast<size_t>(i)] = f[static_cast<size_t>(i)] * (1.5 + u(rng) / 3);
    }
    auto r = PlanPartition(f, b, stages);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(static_cast<int>(r->counts.size()), stages);
    EXPECT_EQ(std::accumulate(r->counts.begin(), r->counts.end(), 0), n);
    for (int c : r->counts) EXPECT_GE(c, 1);
    EXPECT_LE(r->score.iteration_s, r->dp_score.iteration_s);
    auto rescored = ScorePartition(f, b, r->counts);
    ASSERT_TRUE(rescored.ok());
    EXPECT_DOUBLE_EQ(rescored->iteration_s, r->score.iteration_s);
    auto dp_only = PlanPartition(f, b, stages, false);
    ASSERT_TRUE(dp_only.ok());
    EXPECT_DOUBLE_EQ(dp_only->score.iteration_s, r->dp_score.iteration_s);
    if (r->score.iteration_s < r->dp_score.iteration_s) ++improved;
  }
  // The search is not idle: on random chains it finds faster partitions than min-max often.
  EXPECT_GT(improved, 0);
}

TEST(BalancedPartition, EqualLayersSplitEvenly) {
  const std::vector<double> f(24, 1.0), b(24, 2.0);
  auto r = PlanPartition(f, b, 4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->counts, (std::vector<int>{6, 6, 6, 6}));
  // 1F1B with 2P micro-batches over equal stages: (2P + P - 1)(f + b).
  EXPECT_DOUBLE_EQ(r->score.iteration_s, (8 + 4 - 1) * 18.0);
  EXPECT_EQ(r->score.critical_stage, 3);  // among equals the last stage dominates
}

TEST(BalancedPartition, RejectsMoreStagesThanItems) {
  EXPECT_EQ(PlanPartition({1, 1}, {2, 2}, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testbed::autopipe
