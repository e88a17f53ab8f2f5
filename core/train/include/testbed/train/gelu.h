// GELU activation, tanh approximation (as in GPT-2):
// gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
#pragma once

#include "testbed/train/layer.h"

namespace testbed::train {

template <typename T>
[[nodiscard]] T GeluValue(T x) noexcept;
// d gelu / dx.
template <typename T>
[[nodiscard]] T GeluDerivative(T x) noexcept;

template <typename T>
class Gelu final : public Layer<T> {
 public:
  [[nodiscard]] std::string kind() const override { return "gelu"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<Gelu>(*this); }
};

}  // namespace testbed::train
