#include "testbed/train/sharding.h"

namespace testbed::train {

ShardRange EvenShard(std::int64_t total, int rank, int size) noexcept {
  const std::int64_t base = total / size;
  const std::int64_t extra = total % size;
  ShardRange r;
  r.count = base + (rank < extra ? 1 : 0);
  r.offset = rank * base + (rank < extra ? rank : extra);
  return r;
}

template <typename T>
Matrix<T> SelectColumns(const Matrix<T>& m, const std::vector<std::int64_t>& columns) {
  Matrix<T> out(m.rows(), static_cast<Eigen::Index>(columns.size()));
  for (size_t j = 0; j < columns.size(); ++j) out.col(static_cast<Eigen::Index>(j)) = m.col(columns[j]);
  return out;
}

template <typename T>
void ScatterColumns(Matrix<T>& m, const std::vector<std::int64_t>& columns, const Matrix<T>& part) {
  for (size_t j = 0; j < columns.size(); ++j) m.col(columns[j]) = part.col(static_cast<Eigen::Index>(j));
}

template <typename T>
Matrix<T> ConcatColumns(const std::vector<const Matrix<T>*>& parts) {
  Eigen::Index cols = 0;
  for (const Matrix<T>* p : parts) cols += p->cols();
  Matrix<T> out(parts.empty() ? 0 : parts[0]->rows(), cols);
  Eigen::Index at = 0;
  for (const Matrix<T>* p : parts) {
    out.middleCols(at, p->cols()) = *p;
    at += p->cols();
  }
  return out;
}

template <typename T>
Matrix<T> ConcatRows(const std::vector<const Matrix<T>*>& parts) {
  Eigen::Index rows = 0;
  for (const Matrix<T>* p : parts) rows += p->rows();
  Matrix<T> out(rows, parts.empty() ? 0 : parts[0]->cols());
  Eigen::Index at = 0;
  for (const Matrix<T>* p : parts) {
    out.middleRows(at, p->rows()) = *p;
    at += p->rows();
  }
  return out;
}

#define TESTBED_SHARDING_INSTANTIATE(T)                                                        \
  template Matrix<T> SelectColumns<T>(const Matrix<T>&, const std::vector<std::int64_t>&);      \
  template void ScatterColumns<T>(Matrix<T>&, const std::vector<std::int64_t>&, const Matrix<T>&); \
  template Matrix<T> ConcatColumns<T>(const std::vector<const Matrix<T>*>&);                   \
  template Matrix<T> ConcatRows<T>(const std::vector<const Matrix<T>*>&);
TESTBED_SHARDING_INSTANTIATE(float)
TESTBED_SHARDING_INSTANTIATE(double)
#undef TESTBED_SHARDING_INSTANTIATE

}  // namespace testbed::train
