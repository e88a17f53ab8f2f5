#include "testbed/train/layer_norm.h"

#include <cmath>

#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {

template <typename T>
LayerNorm<T>::LayerNorm(const std::string& name, std::int64_t dim, double eps)
    : gamma_(name + ".gamma", Matrix<T>::Ones(1, dim)), beta_(name + ".beta", Matrix<T>::Zero(1, dim)), eps_(eps) {}

template <typename T>
absl::StatusOr<Matrix<T>> LayerNorm<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCols(gamma_.name, "input", x.cols(), gamma_.value.cols()));
  const Eigen::Index n = x.rows(), d = x.cols();
  Matrix<T> xhat(n, d);
  Matrix<T> rstd(n, 1);
  for (Eigen::Index i = 0; i < n; ++i) {
    const T mean = x.row(i).mean();
    const T var = (x.row(i).array() - mean).square().mean();
    const T r = static_cast<T>(1) / std::sqrt(var + static_cast<T>(eps_));
    rstd(i, 0) = r;
    xhat.row(i) = (x.row(i).array() - mean) * r;
  }
  Matrix<T> y = (xhat.array().rowwise() * gamma_.value.row(0).array()).rowwise() + beta_.value.row(0).array();
  cache.Clear();
  cache.tensors.push_back(std::move(xhat));
  cache.tensors.push_back(std::move(rstd));
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> LayerNorm<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCache(gamma_.name, cache.tensors.size() == 2));
  const Matrix<T>& xhat = cache.tensors[0];
  const Matrix<T>& rstd = cache.tensors[1];
  TESTBED_RETURN_IF_ERROR(CheckRows(gamma_.name, "output gradient", dy.rows(), xhat.rows()));
  TESTBED_RETURN_IF_ERROR(CheckCols(gamma_.name, "output gradient", dy.cols(), xhat.cols()));
  gamma_.grad.row(0) += dy.cwiseProduct(xhat).colwise().sum();
  beta_.grad.row(0) += dy.colwise().sum();
  const Matrix<T> dxhat = dy.array().rowwise() * gamma_.value.row(0).array();
  Matrix<T> dx(dy.rows(), dy.cols());
  for (Eigen::Index i = 0; i < dy.rows(); ++i) {
    // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat . xhat))
    const T m1 = dxhat.row(i).mean();
    const T m2 = dxhat.row(i).cwiseProduct(xhat.row(i)).mean();
    dx.row(i) = rstd(i, 0) * (dxhat.row(i).array() - m1 - xhat.row(i).array() * m2);
  }
  return dx;
}

template class LayerNorm<float>;
template class LayerNorm<double>;

}  // namespace testbed::train
