// The cluster-aware codebook: clusters follow the modes of the distribution, buckets are
// shared by the stated rule, and the levels bracket every value.
#include "codebook.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace testbed::casq {
namespace {

std::vector<std::int64_t> HistogramOf(const std::vector<float>& v, const HistogramSpec& spec) {
  std::vector<std::int64_t> h(static_cast<std::size_t>(spec.bins), 0);
  for (float x : v) ++h[static_cast<std::size_t>(BinOf(x, spec))];
  return h;
}

TEST(Codebook, ClustersFollowTheModesOfTheDistribution) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> left(-5.0f, 0.1f), right(5.0f, 0.3f);
  std::vector<float> v;
  for (int i = 0; i < 6000; ++i) v.push_back(left(rng));
  for (int i = 0; i < 4000; ++i) v.push_back(right(rng));
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const HistogramSpec spec = MakeHistogramSpec(*lo, *hi, 1024);
  const Codebook book = BuildCodebook(HistogramOf(v, spec), spec, {3, 2, 50});
  ASSERT_EQ(book.clusters.size(), 2u);
  EXPECT_EQ(book.clusters[0].count, 6000);
  EXPECT_EQ(book.clusters[1].count, 4000);
  EXPECT_LT(book.clusters[0].hi, -4.0);
  EXPECT_GT(book.clusters[1].lo, 4.0);
  EXPECT_NEAR(book.clusters[0].mean, -5.0, 0.05);
  EXPECT_NEAR(book.clusters[1].mean, 5.0, 0.05);
  ASSERT_EQ(book.levels.size(), 8u);
  EXPECT_TRUE(std::is_sorted(book.levels.begin(), book.levels.end()));
  EXPECT_EQ(book.levels.front(), *lo);
  EXPECT_EQ(book.levels.back(), *hi);
  // No level is wasted in the empty gap between the modes.
  for (float level : book.levels) EXPECT_TRUE(level < -4.0f || level > 4.0f) << level;
  EXPECT_EQ(book.clusters[0].levels + book.clusters[1].levels, 8);
}

TEST(Codebook, BucketsAreSharedByCountTimesVarianceToTheOneThird) {
  // Scores 2 : 1 ((8 x 1) vs (1 x 1) count * stddev^2); 8 levels: one each plus 6 shared 4 : 2.
  std::vector<Cluster> c(2);
  c[0].count = 8, c[0].stddev = 1;
  c[1].count = 1, c[1].stddev = 1;
  EXPECT_EQ(AllocateLevels(c, 8), (std::vector<int>{5, 3}));
  // Equal scores: equal shares; a wider spread earns more buckets than more values do.
  c[1].count = 8;
  EXPECT_EQ(AllocateLevels(c, 8), (std::vector<int>{4, 4}));
  c[1].stddev = 2;  // score (8 * 4)^(1/3) = 3.17 vs 2
  const std::vector<int> wider = AllocateLevels(c, 8);
  EXPECT_GT(wider[1], wider[0]);
  // Every cluster gets one even when its score is tiny; the total is always exact.
  std::vector<Cluster> many(4);
  for (std::size_t i = 0; i < 4; ++i) many[i].count = 1, many[i].stddev = i == 0 ? 100 : 1e-6;
  EXPECT_EQ(AllocateLevels(many, 4), (std::vector<int>{1, 1, 1, 1}));
  const std::vector<int> more = AllocateLevels(many, 16);
  EXPECT_EQ(more[0], 13);
  int sum = 0;
  for (int s : more) sum += s;
  EXPECT_EQ(sum, 16);
}

TEST(Codebook, LevelsSitWhereEachClustersValuesAre) {
  // A narrow dense cluster and two sparse wide tails: the dense cluster's levels lie within
  // two standard deviations of its mean, not across the whole span k-means gives it.
  std::mt19937_64 rng(9);
  std::normal_distribution<float> centre(0.0f, 0.01f), tail(0.0f, 1.0f);
  std::vector<float> v;
  for (int i = 0; i < 20000; ++i) v.push_back(centre(rng));
  for (int i = 0; i < 200; ++i) v.push_back(3.0f + std::abs(tail(rng)));
  for (int i = 0; i < 200; ++i) v.push_back(-3.0f - std::abs(tail(rng)));
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const HistogramSpec spec = MakeHistogramSpec(*lo, *hi, 1024);
  const Codebook book = BuildCodebook(HistogramOf(v, spec), spec, {3, 3, 50});
  ASSERT_EQ(book.clusters.size(), 3u);
  const Cluster& mid = book.clusters[1];
  EXPECT_EQ(mid.count, 20000);
  EXPECT_NEAR(mid.stddev, 0.01, 0.005);
  ASSERT_GE(mid.levels, 2);
  int inside = 0;
  for (float level : book.levels) inside += std::abs(level - mid.mean) <= 2 * mid.stddev + 1e-6;
  EXPECT_EQ(inside, mid.levels);
}

TEST(Codebook, DegenerateInputs) {
  // One distinct value: every level is that value.
  const HistogramSpec one = MakeHistogramSpec(0.25f, 0.25f, 64);
  std::vector<std::int64_t> h(64, 0);
  h[0] = 10;
  const Codebook a = BuildCodebook(h, one, {2, 3, 20});
  EXPECT_EQ(a.levels, (std::vector<float>(4, 0.25f)));
  // No values at all.
  const Codebook b = BuildCodebook(std::vector<std::int64_t>(64, 0), MakeHistogramSpec(0, 0, 64), {3, 2, 20});
  EXPECT_EQ(b.levels, (std::vector<float>(8, 0.0f)));
  // The top value lands in the last bin, never past it.
  const HistogramSpec spec = MakeHistogramSpec(-1.0f, 3.0f, 16);
  EXPECT_EQ(BinOf(3.0f, spec), 15);
  EXPECT_EQ(BinOf(-1.0f, spec), 0);
}

}  // namespace
}  // namespace testbed::casq
