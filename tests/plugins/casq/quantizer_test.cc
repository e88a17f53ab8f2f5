// CASQ's quantiser: codes round to a neighbouring level, the rounding is unbiased, clustering
// beats one uniform grid on heavy-tailed gradients, and sparse gradients keep their zeros.
#include "quantizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "casq_test_data.h"
#include "element_rules.h"

namespace testbed::casq {
namespace {

using testing::HeavyTailed;

EncodeSettings Settings(int bits, int clusters, std::uint64_t stream, PositionPolicy policy = PositionPolicy::kAuto) {
  EncodeSettings s;
  s.bits = bits;
  s.clusters = clusters;
  s.stream = stream;
  s.policy = policy;
  return s;
}

std::vector<float> RoundTrip(const std::vector<float>& g, const EncodeSettings& s, EncodedRank* encoded = nullptr) {
  const EncodedRank e = EncodeRank(g, s);
  EXPECT_EQ(e.nonfinite, 0);
  RankView v{e.positions, e.count, e.levels, e.bitmap, e.codes};
  std::vector<float> out(g.size());
  DecodeRanks({&v, 1}, s.bits, 1, out);
  if (encoded != nullptr) *encoded = e;
  return out;
}

// The two levels around v: the largest at or below it and the smallest at or above it.
std::pair<float, float> Bracket(const std::vector<float>& levels, float v) {
  float lower = levels.front(), upper = levels.back();
  for (float l : levels) {
    if (l <= v) lower = std::max(lower, l);
    if (l >= v) upper = std::min(upper, l);
  }
  return {lower, upper};
}

TEST(Quantizer, EveryValueRoundsToALevelNextToIt) {
  for (int bits : {1, 2, 3, 5}) {
    const std::vector<float> g = HeavyTailed(5000, 1.0, 10 + static_cast<std::uint64_t>(bits));
    EncodedRank e;
    const std::vector<float> out = RoundTrip(g, Settings(bits, std::min(3, 1 << bits), 7), &e);
    ASSERT_EQ(e.levels.size(), std::size_t{1} << bits);
    EXPECT_EQ(e.levels.front(), *std::min_element(g.begin(), g.end()));
    EXPECT_EQ(e.levels.back(), *std::max_element(g.begin(), g.end()));
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto [lower, upper] = Bracket(e.levels, g[i]);
      ASSERT_TRUE(out[i] == lower || out[i] == upper) << "bits " << bits << " i " << i << ": " << g[i] << " -> " << out[i];
    }
  }
}

// E[decoded] = value: averaged over T independent roundings the error shrinks like
// gap / (2 sqrt(T)) (the rounding is a two-point variable of spread `gap`). Checked at 6
// standard deviations for every value.
TEST(Quantizer, StochasticRoundingIsUnbiased) {
  const std::vector<float> g = HeavyTailed(2000, 1.0, 5);
  constexpr int kTrials = 400;
  std::vector<double> mean(g.size(), 0.0);
  EncodedRank first;
  for (int t = 0; t < kTrials; ++t) {
    EncodedRank e;
    const std::vector<float> out = RoundTrip(g, Settings(2, 3, StreamKey(1, 0, static_cast<std::uint64_t>(t))), &e);
    if (t == 0) first = e;
    ASSERT_EQ(e.levels, first.levels) << "the codebook depends on the data only";
    for (std::size_t i = 0; i < g.size(); ++i) mean[i] += out[i];
  }
  for (std::size_t i = 0; i < g.size(); ++i) {
    mean[i] /= kTrials;
    const auto [lower, upper] = Bracket(first.levels, g[i]);
    const double sigma = (upper - lower) / (2.0 * std::sqrt(kTrials));
    ASSERT_LE(std::abs(mean[i] - g[i]), 6 * sigma + 1e-12) << i;
  }
}

// Mean squared error of unbiased stochastic rounding to `levels`, in expectation: a value v
// between neighbouring levels a <= v <= b has variance (v - a)(b - v).
double ExpectedSquaredError(const std::vector<float>& g, const std::vector<float>& levels) {
  double sum = 0;
  for (float v : g) {
    const auto [a, b] = Bracket(levels, v);
    sum += (static_cast<double>(v) - a) * (static_cast<double>(b) - v);
  }
  return sum / static_cast<double>(g.size());
}

// The classic uniform quantiser (QSGD, TernGrad style): 2^bits levels evenly over [min, max].
std::vector<float> UniformGrid(const std::vector<float>& g, int bits) {
  const auto [lo, hi] = std::minmax_element(g.begin(), g.end());
  const int count = 1 << bits;
  std::vector<float> levels;
  for (int j = 0; j < count; ++j) levels.push_back(*lo + (*hi - *lo) * static_cast<float>(j) / static_cast<float>(count - 1));
  levels.back() = *hi;
  return levels;
}

// The point of clustering: on a heavy-tailed gradient a uniform grid over [min, max] wastes
// its levels on the sparse tails; clusters put levels where the values are. The paper's claim
// in these terms: 2-bit CASQ is as accurate as 3-bit uniform quantisation.
TEST(Quantizer, ClusteringBeatsUniformGridsOnHeavyTails) {
  for (std::uint64_t seed : {21, 22, 23}) {
    const std::vector<float> g = HeavyTailed(50000, 1.0, seed);
    EncodedRank e;
    (void)RoundTrip(g, Settings(2, 4, 1), &e);
    const double casq2 = ExpectedSquaredError(g, e.levels);
    const double uniform2 = ExpectedSquaredError(g, UniformGrid(g, 2));
    const double uniform3 = ExpectedSquaredError(g, UniformGrid(g, 3));
    std::cout << "[ measured ] seed " << seed << ": expected MSE uniform 2-bit " << uniform2 << ", uniform 3-bit "
              << uniform3 << ", CASQ 2-bit " << casq2 << "\n";
    EXPECT_LT(casq2, 0.2 * uniform2);
    // The error of actual roundings agrees with the expectation.
    double empirical = 0;
    for (std::uint64_t step = 0; step < 8; ++step) {
      const std::vector<float> out = RoundTrip(g, Settings(2, 4, StreamKey(2, 0, step)));
      for (std::size_t i = 0; i < g.size(); ++i) empirical += (static_cast<double>(out[i]) - g[i]) * (static_cast<double>(out[i]) - g[i]);
    }
    EXPECT_NEAR(empirical / (8.0 * static_cast<double>(g.size())), casq2, 0.15 * casq2);
  }
}

TEST(Quantizer, SparseGradientsKeepTheirZeros) {
  const std::vector<float> g = HeavyTailed(100000, 0.03, 4);
  EncodedRank e;
  const std::vector<float> out = RoundTrip(g, Settings(2, 3, 9), &e);
  EXPECT_EQ(e.positions, Positions::kBitmap);
  std::int64_t nonzeros = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    nonzeros += g[i] != 0.0f;
    if (g[i] == 0.0f) {
      ASSERT_EQ(out[i], 0.0f) << i;
    }
  }
  EXPECT_EQ(e.count, nonzeros);
  EXPECT_EQ(static_cast<std::int64_t>(e.codes.size()), (nonzeros + 31) / 32);
  // Forced dense positions code every value, zeros included.
  EncodedRank dense;
  (void)RoundTrip(g, Settings(2, 3, 9, PositionPolicy::kDense), &dense);
  EXPECT_EQ(dense.positions, Positions::kDense);
  EXPECT_TRUE(dense.bitmap.empty());
  EXPECT_EQ(static_cast<std::int64_t>(dense.codes.size()), (100000 + 31) / 32);
  // A dense gradient picks dense positions by itself; 3-bit codes pack 21 to a word.
  EncodedRank full;
  (void)RoundTrip(HeavyTailed(1000, 1.0, 4), Settings(3, 3, 9), &full);
  EXPECT_EQ(full.positions, Positions::kDense);
  EXPECT_EQ(full.codes.size(), (1000u + 20) / 21);
}

TEST(Quantizer, NonFiniteValuesAreReported) {
  std::vector<float> g = HeavyTailed(1000, 0.5, 2);
  g[17] = std::nanf("");
  g[18] = -INFINITY;
  EXPECT_EQ(EncodeRank(g, Settings(2, 3, 1)).nonfinite, 2);
}

}  // namespace
}  // namespace testbed::casq
