#include "sketch_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "sketch_median.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace testbed::s2reducer {
namespace {

// The bitmap word of 64 consecutive values: SSE2 compares and sign-mask extraction, four
// values at a time, so the scan runs at memory speed (g++ does not vectorise the scalar loop).
// Unordered compares count NaN as non-zero, as `v != 0.0f` does; -0.0 counts as zero.
inline std::uint64_t NonZeroMask64(const float* g) noexcept {
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps();
  std::uint64_t bits = 0;
  for (int j = 0; j < 64; j += 4) {
    const auto m = static_cast<unsigned>(_mm_movemask_ps(_mm_cmpneq_ps(_mm_loadu_ps(g + j), zero)));
    bits |= static_cast<std::uint64_t>(m) << j;
  }
  return bits;
#else
  std::uint64_t bits = 0;
  for (int j = 0; j < 64; ++j) bits |= static_cast<std::uint64_t>(g[j] != 0.0f) << j;
  return bits;
#endif
}

inline std::uint64_t NonZeroMaskTail(const float* g, int count) noexcept {
  std::uint64_t bits = 0;
  for (int j = 0; j < count; ++j) bits |= static_cast<std::uint64_t>(g[j] != 0.0f) << j;
  return bits;
}

}  // namespace

// Counter updates are applied in batches: slots are hashed and their cache lines prefetched
// for a whole batch first, so the random accesses of a batch overlap instead of each waiting
// for memory. Updates keep their order, so every counter sums in the same order as without
// batching.
constexpr int kBatch = 256;

struct Update {
  float* counter;
  float value;
};

inline void Apply(const Update* updates, int count) noexcept {
  for (int u = 0; u < count; ++u) *updates[u].counter += updates[u].value;
}

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
  Update pending[kBatch + kMaxRows];
  int queued = 0;
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
        float* c = counters + static_cast<std::int64_t>(r) * shape.columns + s.column;
        __builtin_prefetch(c, 1);
        pending[queued++] = {c, s.sign * v};
      }
      if (queued >= kBatch) {
        Apply(pending, queued);
        queued = 0;
      }
    }
  }
  Apply(pending, queued);
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
  const int rows = shape.rows;
  const auto columns = static_cast<std::uint32_t>(shape.columns);
  const auto d = static_cast<float>(divisor);
  // Gathers in batches, as the encoder's updates: hash and prefetch a batch's counters, then
  // read them and take the medians.
  constexpr int kElements = 64;
  std::int64_t index[kElements];
  const float* cell[kElements][kMaxRows];
  float sign[kElements][kMaxRows];
  int queued = 0;
  auto flush = [&] {
    for (int e = 0; e < queued; ++e) {
      float v[kMaxRows];
      for (int r = 0; r < rows; ++r) v[r] = sign[e][r] * *cell[e][r];
      out[static_cast<std::size_t>(index[e])] = MedianInPlace(v, rows) / d;
    }
    queued = 0;
  };
  for (std::int64_t w = 0; w < shape.bitmap_words(); ++w) {
    std::uint64_t bits = bitmap[static_cast<std::size_t>(w)];
    while (bits != 0) {
      const int j = std::countr_zero(bits);
      bits &= bits - 1;
      const std::int64_t i = 64 * w + j;
      index[queued] = i;
      for (int r = 0; r < rows; ++r) {
        const Slot s = Locate(seeds[static_cast<std::size_t>(r)], static_cast<std::uint64_t>(i), columns);
        const float* c = sketch.data() + static_cast<std::int64_t>(r) * shape.columns + s.column;
        __builtin_prefetch(c, 0);
        cell[queued][r] = c;
        sign[queued][r] = s.sign;
      }
      if (++queued == kElements) flush();
    }
  }
  flush();
}

}  // namespace testbed::s2reducer
