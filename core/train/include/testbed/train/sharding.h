// Splitting a dimension over tensor-parallel ranks and moving matrix slices around: the
// shared arithmetic of the column- and row-parallel layers and of the sharded attention.
// Sizes need not divide evenly: the first `total % size` ranks get one more.
#pragma once

#include <cstdint>
#include <vector>

#include "testbed/train/tensor.h"

namespace testbed::train {

struct ShardRange {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

[[nodiscard]] ShardRange EvenShard(std::int64_t total, int rank, int size) noexcept;

// The listed columns of m, in order.
template <typename T>
[[nodiscard]] Matrix<T> SelectColumns(const Matrix<T>& m, const std::vector<std::int64_t>& columns);
// Writes `part` into the listed columns of `m`.
template <typename T>
void ScatterColumns(Matrix<T>& m, const std::vector<std::int64_t>& columns, const Matrix<T>& part);
// Pieces side by side / one above the other.
template <typename T>
[[nodiscard]] Matrix<T> ConcatColumns(const std::vector<const Matrix<T>*>& parts);
template <typename T>
[[nodiscard]] Matrix<T> ConcatRows(const std::vector<const Matrix<T>*>& parts);

}  // namespace testbed::train
