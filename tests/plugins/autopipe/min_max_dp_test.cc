// The dynamic programme against brute force: on small random chains, for every prefix and
// part count, its optimum equals the best of all contiguous splits, and its split attains it.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "brute_force_min_max.h"
#include "min_max_dp.h"

namespace testbed::autopipe {
namespace {

TEST(PrefixMinMax, EqualsBruteForceOnRandomChains) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(0.01, 10.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 11);
    const int k = 1 + static_cast<int>(rng() % 5);
    std::vector<double> w(static_cast<size_t>(n));
    for (double& x : w) x = trial % 3 == 0 ? std::round(u(rng)) + 1 : u(rng);  // ties too
    const PrefixMinMax dp(w, k);
    for (int prefix = 1; prefix <= n; ++prefix) {
      for (int parts = 1; parts <= std::min(prefix, k); ++parts) {
        const double want = testing::BruteForceMinMax(w, prefix, parts);
        EXPECT_NEAR(dp.Best(prefix, parts), want, 1e-12 * want) << "trial " << trial;
        const std::vector<int> counts = dp.Counts(prefix, parts);
        ASSERT_EQ(static_cast<int>(counts.size()), parts);
        double worst = 0;
        int at = 0;
        for (int c : counts) {
          ASSERT_GE(c, 1);
          worst = std::max(worst, dp.Sum(at, at + c));
          at += c;
        }
        EXPECT_EQ(at, prefix);
        EXPECT_NEAR(worst, want, 1e-12 * want);
      }
    }
  }
}

}  // namespace
}  // namespace testbed::autopipe
