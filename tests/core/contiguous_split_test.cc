// MinMaxContiguousSplit (testbed/plan_search.h) against brute force over every split into
// contiguous non-empty parts: random item weights, parts of different speeds and capacities
// (a part may not hold a range whose weight sum exceeds its capacity), and MinMaxPartition's
// uniform case.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "testbed/plan_search.h"

namespace testbed {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double Brute(int n, int parts, const PartCost& cost) {
  double best = kInf;
  std::vector<int> cuts(static_cast<size_t>(parts - 1));
  for (int i = 0; i < parts - 1; ++i) cuts[static_cast<size_t>(i)] = i + 1;
  while (true) {
    double worst = 0;
    int first = 0;
    for (int p = 0; p < parts; ++p) {
      const int end = p + 1 < parts ? cuts[static_cast<size_t>(p)] : n;
      worst = std::max(worst, cost(p, first, end));
      first = end;
    }
    best = std::min(best, worst);
    int i = parts - 2;
    while (i >= 0 && cuts[static_cast<size_t>(i)] == n - (parts - 1 - i)) --i;
    if (i < 0) break;
    ++cuts[static_cast<size_t>(i)];
    for (int j = i + 1; j < parts - 1; ++j) cuts[static_cast<size_t>(j)] = cuts[static_cast<size_t>(j - 1)] + 1;
  }
  return best;
}

double Worst(const std::vector<int>& counts, const PartCost& cost) {
  double worst = 0;
  int first = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    worst = std::max(worst, cost(static_cast<int>(p), first, first + counts[p]));
    first += counts[p];
  }
  return worst;
}

TEST(ContiguousSplit, EqualsBruteForceOnHeterogeneousParts) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> w(0.1, 2.0), speed(0.5, 3.0);
  int infeasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 9);
    const int parts = 1 + static_cast<int>(rng() % std::min(n, 5));
    std::vector<double> items(static_cast<size_t>(n)), sp(static_cast<size_t>(parts)), cap(static_cast<size_t>(parts));
    for (double& x : items) x = w(rng);
    for (double& x : sp) x = speed(rng);
    // Every part can hold at least its largest single item; some hold little more.
    const double largest = *std::max_element(items.begin(), items.end());
    for (double& x : cap) x = largest + (trial % 3 == 0 ? w(rng) : 100.0);
    const PartCost cost = [&](int p, int first, int end) {
      double sum = 0;
      for (int i = first; i < end; ++i) sum += items[static_cast<size_t>(i)];
      return sum > cap[static_cast<size_t>(p)] ? kInf : sum / sp[static_cast<size_t>(p)];
    };
    const double want = Brute(n, parts, cost);
    auto got = MinMaxContiguousSplit(n, parts, cost, 100.0);
    if (want == kInf) {
      EXPECT_FALSE(got.has_value()) << "trial " << trial;
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(got.has_value()) << "trial " << trial;
    ASSERT_EQ(static_cast<int>(got->size()), parts);
    EXPECT_NEAR(Worst(*got, cost), want, 1e-8 * want) << "trial " << trial;
  }
  EXPECT_GT(infeasible, 0) << "some trials should have no feasible split";
}

TEST(ContiguousSplit, UniformPartsAgreeWithMinMaxPartition) {
  const std::vector<double> weights = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  const PartCost cost = [&](int, int first, int end) {
    double sum = 0;
    for (int i = first; i < end; ++i) sum += weights[static_cast<size_t>(i)];
    return sum;
  };
  for (int parts = 1; parts <= 10; ++parts) {
    auto got = MinMaxContiguousSplit(10, parts, cost, 39.0);
    ASSERT_TRUE(got.has_value());
    EXPECT_NEAR(Worst(*got, cost), Worst(MinMaxPartition(weights, parts), cost), 1e-7) << parts;
  }
  EXPECT_FALSE(MinMaxContiguousSplit(3, 4, cost, 39.0).has_value());
}

}  // namespace
}  // namespace testbed
