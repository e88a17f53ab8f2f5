#include "testbed/train/linear.h"

#include <cmath>
#include <type_traits>

#include "shape_checks.h"
#include "testbed/train/gemm.h"
#include "testbed/status_macros.h"

namespace testbed::train {

template <typename T>
Linear<T>::Linear(const std::string& name, std::int64_t in, std::int64_t out, bool bias, Rng& rng, double init_std)
    : has_bias_(bias) {
  const double std = init_std > 0 ? init_std : 1.0 / std::sqrt(static_cast<double>(in));
  Matrix<T> w(in, out);
  for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = static_cast<T>(rng.Normal() * std);
  weight_ = Param<T>(name + ".weight", std::move(w));
  bias_ = Param<T>(name + ".bias", Matrix<T>::Zero(1, bias ? out : 0));
}

template <typename T>
Linear<T>::Linear(const std::string& name, Matrix<T> weight, std::optional<Matrix<T>> bias)
    : weight_(name + ".weight", std::move(weight)), has_bias_(bias.has_value()) {
  bias_ = Param<T>(name + ".bias", bias ? std::move(*bias) : Matrix<T>::Zero(1, 0));
}

template <typename T>
absl::Status Linear<T>::SetQuantization(const LayerQuant& q) {
  TESTBED_RETURN_IF_ERROR(CheckBits(q.weight_bits, weight_.name + ": weight width"));
  TESTBED_RETURN_IF_ERROR(CheckBits(q.activation_bits, weight_.name + ": activation width"));
  TESTBED_RETURN_IF_ERROR(CheckBits(q.gradient_bits, weight_.name + ": gradient width"));
  quant_ = q;
  quant_rng_ = Rng(q.seed);
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<Matrix<T>> Linear<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(CheckCols(weight_.name, "input", x.cols(), in()));
  cache.Clear();
  // Full precision keeps x only; quantised keeps the rounded input and weights, which the
  // backward products use (the weights may be updated before a pipelined backward runs).
  const bool quantised = !quant_.full_precision();
  cache.tensors.push_back(quantised ? FakeQuantize(x, quant_.activation_bits, Rounding::kNearest, nullptr) : x);
  if (quantised) cache.tensors.push_back(FakeQuantize(weight_.value, quant_.weight_bits, Rounding::kNearest, nullptr));
  const Matrix<T>& xin = cache.tensors[0];
  const Matrix<T>& w = quantised ? cache.tensors[1] : weight_.value;
  Matrix<T> y;
  if constexpr (std::is_same_v<T, float>) {
    TESTBED_RETURN_IF_ERROR(ThreadGemm().Gemm(xin, false, w, false, 0.0f, y));
  } else {
    y = xin * w;
  }
  if (has_bias_) y.rowwise() += bias_.value.row(0);
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> Linear<T>::Backward(const Matrix<T>& dy_in, const LayerCache<T>& cache) {
  const bool quantised = cache.tensors.size() == 2;
  TESTBED_RETURN_IF_ERROR(CheckCache(weight_.name, cache.tensors.size() == 1 || quantised));
  const Matrix<T>& x = cache.tensors[0];
  const Matrix<T>& w = quantised ? cache.tensors[1] : weight_.value;
  TESTBED_RETURN_IF_ERROR(CheckCols(weight_.name, "output gradient", dy_in.cols(), out()));
  TESTBED_RETURN_IF_ERROR(CheckRows(weight_.name, "output gradient", dy_in.rows(), x.rows()));
  Matrix<T> rounded;
  if (quantised && quant_.gradient_bits < 32) {
    rounded = FakeQuantize(dy_in, quant_.gradient_bits, quant_.gradient_rounding, &quant_rng_);
  }
  const Matrix<T>& dy = rounded.size() > 0 ? rounded : dy_in;
  if (has_bias_) bias_.grad.row(0) += dy.colwise().sum();
  if constexpr (std::is_same_v<T, float>) {
    GemmBackend& gemm = ThreadGemm();
    TESTBED_RETURN_IF_ERROR(gemm.Gemm(x, true, dy, false, 1.0f, weight_.grad));
    Matrix<T> dx;
    TESTBED_RETURN_IF_ERROR(gemm.Gemm(dy, false, w, true, 0.0f, dx));
    return dx;
  } else {
    weight_.grad.noalias() += x.transpose() * dy;
    return Matrix<T>(dy * w.transpose());
  }
}

template <typename T>
std::vector<Param<T>*> Linear<T>::Params() {
  if (has_bias_) return {&weight_, &bias_};
  return {&weight_};
}

template class Linear<float>;
template class Linear<double>;

}  // namespace testbed::train
