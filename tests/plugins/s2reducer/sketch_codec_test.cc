// Properties of the count sketch and bitmap themselves: linearity, OR-merging, exact recovery
// without collisions, and the count-sketch error bound.
#include "sketch_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <set>
#include <vector>

#include "gradients.h"

namespace testbed::s2reducer {
namespace {

using testing::DyadicGradient;
using testing::GaussianGradient;
using testing::GradientSpec;

struct Encoded {
  std::vector<std::uint64_t> bitmap;
  std::vector<float> sketch;
  EncodeStats stats;
};

Encoded Encode(const SketchShape& shape, const std::vector<float>& g) {
  Encoded e;
  e.bitmap.resize(static_cast<std::size_t>(shape.bitmap_words()));
  e.sketch.resize(static_cast<std::size_t>(shape.counters()));
  e.stats = EncodeSketch(shape, g, e.bitmap, e.sketch);
  return e;
}

SketchShape Shape(std::int64_t n, int rows, std::int64_t columns, std::uint64_t seed) {
  SketchShape s;
  s.elements = n;
  s.rows = rows;
  s.columns = columns;
  s.seed = seed;
  return s;
}

TEST(SketchCodec, SketchOfSumIsSumOfSketches) {
  // 4099 elements: the last bitmap word is partial.
  const SketchShape shape = Shape(4099, 5, 97, 11);
  for (std::uint64_t trial = 0; trial < 20; ++trial) {
    const GradientSpec spec{shape.elements, 0.2, false};
    const std::vector<float> a = DyadicGradient(spec, 2 * trial + 1);
    const std::vector<float> b = DyadicGradient(spec, 2 * trial + 2);
    std::vector<float> sum(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
    const Encoded ea = Encode(shape, a), eb = Encode(shape, b), es = Encode(shape, sum);
    for (std::size_t k = 0; k < es.sketch.size(); ++k) {
      ASSERT_EQ(ea.sketch[k] + eb.sketch[k], es.sketch[k]) << "counter " << k << " trial " << trial;
    }
  }
}

TEST(SketchCodec, BitmapMarksExactlyTheNonZerosAndMergesByOr) {
  const SketchShape shape = Shape(1000, 3, 64, 5);
  const GradientSpec spec{shape.elements, 0.1, true};
  const std::vector<float> a = DyadicGradient(spec, 7), b = DyadicGradient(spec, 8);
  std::vector<float> sum(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
  const Encoded ea = Encode(shape, a), eb = Encode(shape, b), es = Encode(shape, sum);
  std::int64_t nonzeros = 0;
  for (std::int64_t i = 0; i < shape.elements; ++i) {
    const bool bit = ((ea.bitmap[static_cast<std::size_t>(i / 64)] >> (i % 64)) & 1) != 0;
    EXPECT_EQ(bit, a[static_cast<std::size_t>(i)] != 0.0f) << i;
    nonzeros += a[static_cast<std::size_t>(i)] != 0.0f;
  }
  EXPECT_EQ(ea.stats.nonzeros, nonzeros);
  // Positive values never cancel, so the non-zeros of the sum are the union of the non-zeros.
  for (std::size_t w = 0; w < es.bitmap.size(); ++w) EXPECT_EQ(ea.bitmap[w] | eb.bitmap[w], es.bitmap[w]) << w;
  // Nothing past the end of the gradient.
  EXPECT_EQ(es.bitmap.back() >> (shape.elements % 64), 0u);
}

TEST(SketchCodec, RecoveryIsExactWhenNoNonZeroCollides) {
  const SketchShape shape = Shape(1 << 16, 3, 4096, 3);
  const std::vector<std::uint64_t> seeds = shape.RowSeeds();
  // Pick positions whose columns are free in every row, so every counter holds one value.
  std::vector<std::set<std::uint32_t>> used(static_cast<std::size_t>(shape.rows));
  std::vector<float> g(static_cast<std::size_t>(shape.elements), 0.0f);
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<std::int64_t> position(0, shape.elements - 1);
  std::normal_distribution<float> value(0.0f, 3.0f);
  int placed = 0;
  for (int attempt = 0; attempt < 100000 && placed < 600; ++attempt) {
    const std::int64_t i = position(rng);
    if (g[static_cast<std::size_t>(i)] != 0.0f) continue;
    bool free = true;
    for (int r = 0; r < shape.rows; ++r) {
      free = free && used[static_cast<std::size_t>(r)].count(Locate(seeds[static_cast<std::size_t>(r)], i, 4096).column) == 0;
    }
    if (!free) continue;
    for (int r = 0; r < shape.rows; ++r) {
      used[static_cast<std::size_t>(r)].insert(Locate(seeds[static_cast<std::size_t>(r)], i, 4096).column);
    }
    float v = value(rng);
    if (v == 0.0f) v = 1.0f;
    g[static_cast<std::size_t>(i)] = v;
    ++placed;
  }
  ASSERT_EQ(placed, 600);
  const Encoded e = Encode(shape, g);
  std::vector<float> out(g.size());
  DecodeSketch(shape, e.bitmap, e.sketch, 1, out);
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_EQ(out[i], g[i]) << i;
}

TEST(SketchCodec, RecoveryIsExactWhereMostRowsAreCollisionFree) {
  // A denser load: some values collide. The median is exact for any value that is alone in
  // its counter in more than half of the rows.
  const SketchShape shape = Shape(1 << 15, 5, 1024, 23);
  const std::vector<std::uint64_t> seeds = shape.RowSeeds();
  const std::vector<float> g = GaussianGradient(shape.elements, 0.02, 29);
  std::vector<std::vector<int>> load(static_cast<std::size_t>(shape.rows), std::vector<int>(1024, 0));
  for (std::int64_t i = 0; i < shape.elements; ++i) {
    if (g[static_cast<std::size_t>(i)] == 0.0f) continue;
    for (int r = 0; r < shape.rows; ++r) ++load[static_cast<std::size_t>(r)][Locate(seeds[static_cast<std::size_t>(r)], i, 1024).column];
  }
  const Encoded e = Encode(shape, g);
  std::vector<float> out(g.size());
  DecodeSketch(shape, e.bitmap, e.sketch, 1, out);
  int qualified = 0, collided = 0;
  for (std::int64_t i = 0; i < shape.elements; ++i) {
    if (g[static_cast<std::size_t>(i)] == 0.0f) continue;
    int alone = 0;
    for (int r = 0; r < shape.rows; ++r) alone += load[static_cast<std::size_t>(r)][Locate(seeds[static_cast<std::size_t>(r)], i, 1024).column] == 1;
    if (alone > shape.rows / 2) {
      ++qualified;
      EXPECT_EQ(out[static_cast<std::size_t>(i)], g[static_cast<std::size_t>(i)]) << i;
    } else {
      ++collided;
    }
  }
  // The check is not vacuous: both kinds occur at this load.
  EXPECT_GT(qualified, 100);
  EXPECT_GT(collided, 0);
}

// Count sketch (Charikar, Chen, Farach-Colton): with w columns, one row's estimate of x_i has
// error variance at most ||x||_2^2 / w, so by Chebyshev it exceeds eps * ||x||_2 with
// probability at most 1 / (w eps^2) = 1/3 for w = 3 / eps^2. The median of d rows fails only
// if at least ceil(d/2) rows fail: for d = 5, delta = P(Binomial(5, 1/3) >= 3) = 51/243.
// Over many independent sketches the fraction of failing estimates must stay below delta.
TEST(SketchCodec, EstimateErrorStaysWithinTheCountSketchBound) {
  constexpr double kEps = 0.1;
  constexpr int kRows = 5;
  const auto columns = static_cast<std::int64_t>(std::ceil(3.0 / (kEps * kEps)));
  constexpr double kDelta = 51.0 / 243.0;
  std::int64_t estimates = 0, failures = 0;
  double worst = 0;
  for (std::uint64_t trial = 0; trial < 40; ++trial) {
    const SketchShape shape = Shape(20000, kRows, columns, 1000 + trial);
    const std::vector<float> g = GaussianGradient(shape.elements, 0.05, 5000 + trial);
    double norm2 = 0;
    for (float v : g) norm2 += static_cast<double>(v) * v;
    const double bound = kEps * std::sqrt(norm2);
    const Encoded e = Encode(shape, g);
    std::vector<float> out(g.size());
    DecodeSketch(shape, e.bitmap, e.sketch, 1, out);
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (g[i] == 0.0f) continue;
      const double err = std::abs(static_cast<double>(out[i]) - g[i]);
      worst = std::max(worst, err / bound);
      ++estimates;
      failures += err > bound;
    }
  }
  ASSERT_GT(estimates, 30000);
  const double rate = static_cast<double>(failures) / static_cast<double>(estimates);
  RecordProperty("failure_rate", std::to_string(rate));
  std::cout << "[ measured ] " << failures << " of " << estimates << " estimates beyond eps * ||x||_2 (rate " << rate
            << ", bound " << kDelta << "); worst error " << worst << " x eps * ||x||_2\n";
  EXPECT_LE(rate, kDelta) << failures << " of " << estimates << " estimates off by more than eps * ||x||_2"
                          << " (worst " << worst << " x the bound)";
}

TEST(SketchCodec, MedianHandlesEvenRowCounts) {
  // With 2 rows and no collisions both rows agree, so even the mean-of-two median is exact.
  const SketchShape shape = Shape(64, 2, 1 << 20, 9);
  std::vector<float> g(64, 0.0f);
  g[5] = 1.5f;
  const Encoded e = Encode(shape, g);
  std::vector<float> out(64);
  DecodeSketch(shape, e.bitmap, e.sketch, 1, out);
  EXPECT_EQ(out[5], 1.5f);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i != 5) {
      EXPECT_EQ(out[i], 0.0f);
    }
  }
}

}  // namespace
}  // namespace testbed::s2reducer
