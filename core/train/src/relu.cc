#include "testbed/train/relu.h"

#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {

template <typename T>
absl::StatusOr<Matrix<T>> Relu<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  Matrix<T> y = x.cwiseMax(T(0));
  cache.Clear();
  cache.tensors.push_back(y);
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> Relu<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCache("relu", cache.tensors.size() == 1));
  const Matrix<T>& y = cache.tensors[0];
  TESTBED_RETURN_IF_ERROR(CheckRows("relu", "output gradient", dy.rows(), y.rows()));
  TESTBED_RETURN_IF_ERROR(CheckCols("relu", "output gradient", dy.cols(), y.cols()));
  return Matrix<T>((y.array() > T(0)).select(dy.array(), T(0)));
}

template class Relu<float>;
template class Relu<double>;

}  // namespace testbed::train
