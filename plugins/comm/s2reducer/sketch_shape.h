// The shape of an S2Reducer payload: gradient length, sketch rows and columns, hash seed.
// Every rank must use the same shape; it travels in the payload's agreement part.
#pragma once

#include <cstdint>
#include <vector>

#include "s2reducer_hash.h"

namespace testbed::s2reducer {

inline constexpr int kMaxRows = 31;

struct SketchShape {
  std::int64_t elements = 0;  // gradient length n
  int rows = 3;
  std::int64_t columns = 1;   // counters per row, below 2^32
  std::uint64_t seed = 1;

  [[nodiscard]] std::int64_t bitmap_words() const noexcept { return (elements + 63) / 64; }
  [[nodiscard]] std::int64_t counters() const noexcept { return rows * columns; }
  [[nodiscard]] std::vector<std::uint64_t> RowSeeds() const {
    std::vector<std::uint64_t> s(static_cast<std::size_t>(rows));
    for (int r = 0; r < rows; ++r) s[static_cast<std::size_t>(r)] = RowSeed(seed, r);
    return s;
  }
};

}  // namespace testbed::s2reducer
