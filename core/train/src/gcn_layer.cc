#include "testbed/train/gcn_layer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "graph_checks.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {

template <typename T>
GcnLayer<T>::GcnLayer(const std::string& name, std::int64_t in, std::int64_t out, Rng& rng) {
  const double limit = std::sqrt(6.0 / static_cast<double>(in + out));
  Matrix<T> w(in, out);
  for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = static_cast<T>((2 * rng.Uniform() - 1) * limit);
  weight_ = Param<T>(name + ".weight", std::move(w));
  bias_ = Param<T>(name + ".bias", Matrix<T>::Zero(1, out));
}

template <typename T>
absl::StatusOr<Matrix<T>> GcnLayer<T>::Forward(const Matrix<T>& x, const Csr& graph,
                                               std::span<const std::int64_t> degrees, LayerCache<T>& cache) {
  const std::string& name = weight_.name;
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "input", x.cols(), weight_.value.rows()));
  TESTBED_RETURN_IF_ERROR(CheckGraph(name, graph, x.rows()));
  const std::int64_t m = graph.targets();
  if (static_cast<std::int64_t>(degrees.size()) != x.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", degrees.size(), " degrees for ", x.rows(), " rows"));
  }
  // Edge weights, self-loop first for each target: (row, weight) pairs in target order.
  std::vector<std::int64_t> rows;
  Matrix<T> weights(1, static_cast<Eigen::Index>(graph.neighbors.size() + static_cast<size_t>(m)));
  rows.reserve(graph.neighbors.size() + static_cast<size_t>(m));
  auto norm = [&](std::int64_t r) { return static_cast<T>(std::sqrt(static_cast<double>(degrees[static_cast<size_t>(r)] + 1))); };
  Eigen::Index e = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t begin = graph.offsets[static_cast<size_t>(i)], end = graph.offsets[static_cast<size_t>(i) + 1];
    rows.push_back(i);
    weights(0, e++) = static_cast<T>(1) / (norm(i) * norm(i));
    for (std::int64_t k = begin; k < end; ++k) {
      const std::int64_t j = graph.neighbors[static_cast<size_t>(k)];
      rows.push_back(j);
      weights(0, e++) = static_cast<T>(1) / (norm(i) * norm(j));
    }
  }
  const Matrix<T> z = x * weight_.value;
  Matrix<T> y = Matrix<T>::Zero(m, z.cols());
  e = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t count = graph.offsets[static_cast<size_t>(i) + 1] - graph.offsets[static_cast<size_t>(i)] + 1;
    for (std::int64_t k = 0; k < count; ++k, ++e) y.row(i) += weights(0, e) * z.row(rows[static_cast<size_t>(e)]);
  }
  y.rowwise() += bias_.value.row(0);
  cache.Clear();
  cache.tensors.push_back(x);
  cache.tensors.push_back(std::move(weights));
  cache.indices.push_back(graph.offsets);
  cache.indices.push_back(std::move(rows));
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> GcnLayer<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  const std::string& name = weight_.name;
  TESTBED_RETURN_IF_ERROR(CheckCache(name, cache.tensors.size() == 2 && cache.indices.size() == 2));
  const Matrix<T>& x = cache.tensors[0];
  const Matrix<T>& weights = cache.tensors[1];
  const auto& offsets = cache.indices[0];
  const auto& rows = cache.indices[1];
  const auto m = static_cast<std::int64_t>(offsets.size()) - 1;
  TESTBED_RETURN_IF_ERROR(CheckRows(name, "output gradient", dy.rows(), m));
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "output gradient", dy.cols(), weight_.value.cols()));
  bias_.grad.row(0) += dy.colwise().sum();
  // dz_j = sum over the targets i that read row j of w_ij dy_i.
  Matrix<T> dz = Matrix<T>::Zero(x.rows(), dy.cols());
  Eigen::Index e = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t count = offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)] + 1;
    for (std::int64_t k = 0; k < count; ++k, ++e) dz.row(rows[static_cast<size_t>(e)]) += weights(0, e) * dy.row(i);
  }
  weight_.grad.noalias() += x.transpose() * dz;
  return Matrix<T>(dz * weight_.value.transpose());
}

template class GcnLayer<float>;
template class GcnLayer<double>;

}  // namespace testbed::train
