// The dynamic programme against brute force: on small random chains, for every prefix and
// part count, its optimum equals the best of all contiguous splits, and its split attains it.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "min_max_dp.h"

namespace testbed::autopipe {
namespace {

double BruteForce(const std::vector<double>& w, int n, int parts) {
  double best = 1e300;
  std::function<void(int, int, double)> go = [&](int start, int left, double worst) {
    if (left == 1) {
      double sum = 0;
      for (int i = start; i < n; ++i) sum += w[static_cast<size_t>(i)];
      best = std::min(best, std::max(worst, sum));
      return;
    }
    double sum = 0;
    for (int end = start + 1; end <= n - (left - 1); ++end) {
      sum += w[static_cast<size_t>(end - 1)];
      go(end, left - 1, std::max(worst, sum));
    }
  };
  go(0, parts, 0);
  return best;
}

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
        const double want = BruteForce(w, prefix, parts);
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
