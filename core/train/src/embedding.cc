#include "testbed/train/embedding.h"

#include "absl/strings/str_cat.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {

template <typename T>
Embedding<T>::Embedding(const std::string& name, std::int64_t vocab, std::int64_t dim, std::int64_t seq_len, Rng& rng,
                        double init_std)
    : seq_len_(seq_len) {
  Matrix<T> tok(vocab, dim), pos(seq_len, dim);
  for (Eigen::Index i = 0; i < tok.size(); ++i) tok.data()[i] = static_cast<T>(rng.Normal() * init_std);
  for (Eigen::Index i = 0; i < pos.size(); ++i) pos.data()[i] = static_cast<T>(rng.Normal() * init_std);
  tokens_ = Param<T>(name + ".tokens", std::move(tok));
  positions_ = Param<T>(name + ".positions", std::move(pos));
}

template <typename T>
absl::StatusOr<Matrix<T>> Embedding<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCols(tokens_.name, "input (token ids)", x.cols(), 1));
  if (seq_len_ > 0 && x.rows() % seq_len_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(tokens_.name, ": ", x.rows(), " tokens is not a whole number of sequences of ", seq_len_));
  }
  std::vector<std::int64_t> ids = ColumnToIds(x);
  const std::int64_t vocab = tokens_.value.rows();
  Matrix<T> y(x.rows(), tokens_.value.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const std::int64_t id = ids[static_cast<size_t>(i)];
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(tokens_.name, ": token id ", id, " outside [0, ", vocab, ")"));
    }
    y.row(i) = tokens_.value.row(id);
    if (seq_len_ > 0) y.row(i) += positions_.value.row(i % seq_len_);
  }
  cache.Clear();
  cache.indices.push_back(std::move(ids));
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> Embedding<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCache(tokens_.name, cache.indices.size() == 1));
  const std::vector<std::int64_t>& ids = cache.indices[0];
  TESTBED_RETURN_IF_ERROR(CheckRows(tokens_.name, "output gradient", dy.rows(), static_cast<std::int64_t>(ids.size())));
  TESTBED_RETURN_IF_ERROR(CheckCols(tokens_.name, "output gradient", dy.cols(), tokens_.value.cols()));
  // In row order, so repeated tokens accumulate in a fixed order (deterministic sums).
  for (Eigen::Index i = 0; i < dy.rows(); ++i) {
    tokens_.grad.row(ids[static_cast<size_t>(i)]) += dy.row(i);
    if (seq_len_ > 0) positions_.grad.row(i % seq_len_) += dy.row(i);
  }
  return Matrix<T>(Matrix<T>::Zero(dy.rows(), 1));
}

template <typename T>
std::vector<Param<T>*> Embedding<T>::Params() {
  if (seq_len_ > 0) return {&tokens_, &positions_};
  return {&tokens_};
}

template class Embedding<float>;
template class Embedding<double>;

}  // namespace testbed::train
