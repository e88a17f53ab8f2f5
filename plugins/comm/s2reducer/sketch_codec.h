// The S2Reducer data path on the CPU: a bitmap of the non-zero positions plus a count sketch
// of the non-zero values (encode), and the median-over-rows estimate at the bitmap's positions
// (decode). Plain functions on buffers, shared by the component, the tests and the benchmark.
#pragma once

#include <cstdint>
#include <span>

#include "sketch_shape.h"

namespace testbed::s2reducer {

struct EncodeStats {
  std::int64_t nonzeros = 0;
  std::int64_t nonfinite = 0;  // NaN or infinite values seen (they are non-zero, so counted)
};

// Overwrites `bitmap` (shape.bitmap_words()) with bit i = (gradient[i] != 0) and `sketch`
// (shape.counters(), row-major) with, for every row r and non-zero i,
// sketch[r][column_r(i)] += sign_r(i) * gradient[i]. Sizes are the caller's to check.
[[nodiscard]] EncodeStats EncodeSketch(const SketchShape& shape, std::span<const float> gradient,
                                       std::span<std::uint64_t> bitmap, std::span<float> sketch) noexcept;

// The count-sketch estimate of element `index`: median over rows of sign_r * counter_r.
[[nodiscard]] float EstimateElement(const SketchShape& shape, std::span<const std::uint64_t> row_seeds,
                                    std::span<const float> sketch, std::int64_t index) noexcept;

// out[i] = EstimateElement(i) / divisor where the bitmap has bit i, 0 elsewhere.
void DecodeSketch(const SketchShape& shape, std::span<const std::uint64_t> bitmap, std::span<const float> sketch,
                  int divisor, std::span<float> out) noexcept;

}  // namespace testbed::s2reducer
