#include "sketch_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "sketch_median.h"

namespace testbed::s2reducer {
namespace {

// The bitmap word of 64 consecutive values. A fixed trip count lets the compiler turn the
// comparisons into vector compares and a mask extraction.
inline std::uint64_t NonZeroMask64(const float* g) noexcept {
  std::uint64_t bits = 0;
  for (int j = 0; j < 64; ++j) bits |= static_cast<std::uint64_t>(g[j] != 0.0f) << j;
  return bits;
}

inline std::uint64_t NonZeroMaskTail(const float* g, int count) noexcept {
  std::uint64_t bits = 0;
  for (int j = 0; j < count; ++j) bits |= static_cast<std::uint64_t>(g[j] != 0.0f) << j;
  return bits;
}

}  // namespace

EncodeStats EncodeSketch(const SketchShape& shape, std::span<const float> gradient, std::span<std::uint64_t> bitmap,
                         std::span<float> sketch) noexcept {
  EncodeStats stats;
  std::fill(sketch.begin(), sketch.end(), 0.0f);
  const std::int64_t n = shape.elements;
  const int rows = shape.rows;
  const auto columns = static_cast<std::uint32_t>(shape.columns);
  std::uint64_t seeds[kMaxRows];
  for (int r = 0; r < rows; ++r) seeds[r] = RowSeed(shape.seed, r);
  const float* g = gradient.data();
  float* counters = sketch.data();
  const std::int64_t words = shape.bitmap_words();
  for (std::int64_t w = 0; w < words; ++w) {
    const std::int64_t base = 64 * w;
    const int count = static_cast<int>(std::min<std::int64_t>(64, n - base));
    std::uint64_t bits = count == 64 ? NonZeroMask64(g + base) : NonZeroMaskTail(g + base, count);
    bitmap[static_cast<std::size_t>(w)] = bits;
    stats.nonzeros += std::popcount(bits);
    // Only non-zero values reach the sketch, and NaN and infinities are non-zero: checking
    // finiteness here costs nothing on the dense scan.
    while (bits != 0) {
      const int j = std::countr_zero(bits);
      bits &= bits - 1;
      const std::int64_t i = base + j;
      const float v = g[i];
      if (!std::isfinite(v)) ++stats.nonfinite;
      for (int r = 0; r < rows; ++r) {
        const Slot s = Locate(seeds[r], static_cast<std::uint64_t>(i), columns);
        counters[static_cast<std::int64_t>(r) * shape.columns + s.column] += s.sign * v;
      }
    }
  }
  return stats;
}

float EstimateElement(const SketchShape& shape, std::span<const std::uint64_t> row_seeds, std::span<const float> sketch,
                      std::int64_t index) noexcept {
  float v[kMaxRows];
  const auto columns = static_cast<std::uint32_t>(shape.columns);
  for (int r = 0; r < shape.rows; ++r) {
    const Slot s = Locate(row_seeds[static_cast<std::size_t>(r)], static_cast<std::uint64_t>(index), columns);
    v[r] = s.sign * sketch[static_cast<std::size_t>(static_cast<std::int64_t>(r) * shape.columns + s.column)];
  }
  return MedianInPlace(v, shape.rows);
}

void DecodeSketch(const SketchShape& shape, std::span<const std::uint64_t> bitmap, std::span<const float> sketch,
                  int divisor, std::span<float> out) noexcept {
  std::memset(out.data(), 0, out.size_bytes());
  const std::vector<std::uint64_t> seeds = shape.RowSeeds();
  const auto d = static_cast<float>(divisor);
  for (std::int64_t w = 0; w < shape.bitmap_words(); ++w) {
    std::uint64_t bits = bitmap[static_cast<std::size_t>(w)];
    while (bits != 0) {
      const int j = std::countr_zero(bits);
      bits &= bits - 1;
      const std::int64_t i = 64 * w + j;
      out[static_cast<std::size_t>(i)] = EstimateElement(shape, seeds, sketch, i) / d;
    }
  }
}

}  // namespace testbed::s2reducer
