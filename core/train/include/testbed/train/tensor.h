// Dense tensors of the training engine: row-major Eigen matrices whose rows are tokens
// (or samples, or graph nodes) and whose columns are features. Every layer is written for
// float (training) and double (finite-difference gradient checks).
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Dense>

namespace testbed::train {

template <typename T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Token ids travel between pipeline stages like any activation: a column of ids stored as T
// (exact for ids below 2^24 in float). These convert.
template <typename T>
[[nodiscard]] Matrix<T> IdsToColumn(const std::vector<std::int64_t>& ids) {
  Matrix<T> m(static_cast<Eigen::Index>(ids.size()), 1);
  for (size_t i = 0; i < ids.size(); ++i) m(static_cast<Eigen::Index>(i), 0) = static_cast<T>(ids[i]);
  return m;
}

template <typename T>
[[nodiscard]] std::vector<std::int64_t> ColumnToIds(const Matrix<T>& m) {
  std::vector<std::int64_t> ids(static_cast<size_t>(m.rows()));
  for (Eigen::Index i = 0; i < m.rows(); ++i) ids[static_cast<size_t>(i)] = static_cast<std::int64_t>(m(i, 0) + T(0.5));
  return ids;
}

}  // namespace testbed::train
