// Layer normalisation over the feature columns of each row, with learned scale (gamma,
// initialised to 1) and shift (beta, 0).
#pragma once

#include <string>

#include "testbed/train/layer.h"

namespace testbed::train {

template <typename T>
class LayerNorm final : public Layer<T> {
 public:
  LayerNorm(const std::string& name, std::int64_t dim, double eps = 1e-5);

  [[nodiscard]] std::string kind() const override { return "layer_norm"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::vector<Param<T>*> Params() override { return {&gamma_, &beta_}; }
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<LayerNorm>(*this); }

  [[nodiscard]] double eps() const noexcept { return eps_; }

 private:
  Param<T> gamma_;
  Param<T> beta_;
  double eps_;
};

}  // namespace testbed::train
