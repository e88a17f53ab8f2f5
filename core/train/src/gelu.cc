#include "testbed/train/gelu.h"

#include <cmath>

#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;

}  // namespace

template <typename T>
T GeluValue(T x) noexcept {
  const T inner = static_cast<T>(kSqrt2OverPi) * (x + static_cast<T>(kCubic) * x * x * x);
  return static_cast<T>(0.5) * x * (static_cast<T>(1) + std::tanh(inner));
}

template <typename T>
T GeluDerivative(T x) noexcept {
  const T inner = static_cast<T>(kSqrt2OverPi) * (x + static_cast<T>(kCubic) * x * x * x);
  const T t = std::tanh(inner);
  const T dinner = static_cast<T>(kSqrt2OverPi) * (static_cast<T>(1) + static_cast<T>(3 * kCubic) * x * x);
  return static_cast<T>(0.5) * (static_cast<T>(1) + t) + static_cast<T>(0.5) * x * (static_cast<T>(1) - t * t) * dinner;
}

template <typename T>
absl::StatusOr<Matrix<T>> Gelu<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  cache.Clear();
  cache.tensors.push_back(x);
  return Matrix<T>(x.unaryExpr([](T v) { return GeluValue(v); }));
}

template <typename T>
absl::StatusOr<Matrix<T>> Gelu<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCache("gelu", cache.tensors.size() == 1));
  const Matrix<T>& x = cache.tensors[0];
  TESTBED_RETURN_IF_ERROR(CheckRows("gelu", "output gradient", dy.rows(), x.rows()));
  TESTBED_RETURN_IF_ERROR(CheckCols("gelu", "output gradient", dy.cols(), x.cols()));
  return Matrix<T>(dy.cwiseProduct(x.unaryExpr([](T v) { return GeluDerivative(v); })));
}

template float GeluValue<float>(float) noexcept;
template double GeluValue<double>(double) noexcept;
template float GeluDerivative<float>(float) noexcept;
template double GeluDerivative<double>(double) noexcept;
template class Gelu<float>;
template class Gelu<double>;

}  // namespace testbed::train
