#include "testbed/train/sage_layer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "graph_checks.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {

template <typename T>
SageMeanLayer<T>::SageMeanLayer(const std::string& name, std::int64_t in, std::int64_t out, Rng& rng,
                                double init_std) {
  const double std = init_std > 0 ? init_std : 1.0 / std::sqrt(static_cast<double>(in));
  Matrix<T> ws(in, out), wn(in, out);
  for (Eigen::Index i = 0; i < ws.size(); ++i) ws.data()[i] = static_cast<T>(rng.Normal() * std);
  for (Eigen::Index i = 0; i < wn.size(); ++i) wn.data()[i] = static_cast<T>(rng.Normal() * std);
  w_self_ = Param<T>(name + ".w_self", std::move(ws));
  w_neigh_ = Param<T>(name + ".w_neigh", std::move(wn));
  bias_ = Param<T>(name + ".bias", Matrix<T>::Zero(1, out));
}

template <typename T>
absl::StatusOr<Matrix<T>> SageMeanLayer<T>::Forward(const Matrix<T>& x, const Csr& graph, LayerCache<T>& cache) {
  const std::string& name = w_self_.name;
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "input", x.cols(), w_self_.value.rows()));
  TESTBED_RETURN_IF_ERROR(CheckGraph(name, graph, x.rows()));
  const std::int64_t m = graph.targets();
  Matrix<T> agg = Matrix<T>::Zero(m, x.cols());
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t begin = graph.offsets[static_cast<size_t>(i)];
    const std::int64_t end = graph.offsets[static_cast<size_t>(i) + 1];
    for (std::int64_t k = begin; k < end; ++k) agg.row(i) += x.row(graph.neighbors[static_cast<size_t>(k)]);
    if (end > begin) agg.row(i) /= static_cast<T>(end - begin);
  }
  Matrix<T> y = x.topRows(m) * w_self_.value + agg * w_neigh_.value;
  y.rowwise() += bias_.value.row(0);
  cache.Clear();
  cache.tensors.push_back(x);
  cache.tensors.push_back(std::move(agg));
  cache.indices.push_back(graph.offsets);
  cache.indices.push_back(graph.neighbors);
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> SageMeanLayer<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  const std::string& name = w_self_.name;
  TESTBED_RETURN_IF_ERROR(CheckCache(name, cache.tensors.size() == 2 && cache.indices.size() == 2));
  const Matrix<T>& x = cache.tensors[0];
  const Matrix<T>& agg = cache.tensors[1];
  const auto& offsets = cache.indices[0];
  const auto& neighbors = cache.indices[1];
  const std::int64_t m = agg.rows();
  TESTBED_RETURN_IF_ERROR(CheckRows(name, "output gradient", dy.rows(), m));
  TESTBED_RETURN_IF_ERROR(CheckCols(name, "output gradient", dy.cols(), w_self_.value.cols()));
  w_self_.grad.noalias() += x.topRows(m).transpose() * dy;
  w_neigh_.grad.noalias() += agg.transpose() * dy;
  bias_.grad.row(0) += dy.colwise().sum();
  Matrix<T> dx = Matrix<T>::Zero(x.rows(), x.cols());
  dx.topRows(m) = dy * w_self_.value.transpose();
  const Matrix<T> dagg = dy * w_neigh_.value.transpose();
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t begin = offsets[static_cast<size_t>(i)];
    const std::int64_t end = offsets[static_cast<size_t>(i) + 1];
    if (end == begin) continue;
    const T share = static_cast<T>(1) / static_cast<T>(end - begin);
    for (std::int64_t k = begin; k < end; ++k) dx.row(neighbors[static_cast<size_t>(k)]) += share * dagg.row(i);
  }
  return dx;
}

template class SageMeanLayer<float>;
template class SageMeanLayer<double>;

}  // namespace testbed::train
