// Fully connected layer y = x W + b, W of shape [in, out]. The building block of the
// attention projections, the MLPs, the MoE experts and the tensor-parallel shards.
#pragma once

#include <optional>
#include <string>

#include "testbed/train/layer.h"
#include "testbed/train/rng.h"

namespace testbed::train {

template <typename T>
class Linear final : public Layer<T> {
 public:
  // W ~ N(0, init_std^2), with init_std <= 0 meaning 1/sqrt(in); b = 0.
  Linear(const std::string& name, std::int64_t in, std::int64_t out, bool bias, Rng& rng, double init_std = 0);
  // Given weights (shards, tests). `bias`, when present, is [1, out].
  Linear(const std::string& name, Matrix<T> weight, std::optional<Matrix<T>> bias);

  [[nodiscard]] std::string kind() const override { return "linear"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::vector<Param<T>*> Params() override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<Linear>(*this); }
  // Quantised: y = Q_a(x) Q_w(W) + b with nearest rounding; backward rounds dL/dy to
  // gradient_bits and passes it through the quantisers unchanged (straight-through
  // estimator): dL/dW += Q_a(x)^T Q_g(dy), dL/dx = Q_g(dy) Q_w(W)^T, dL/db += sum Q_g(dy).
  [[nodiscard]] absl::Status SetQuantization(const LayerQuant& q) override;
  [[nodiscard]] const LayerQuant& quantization() const noexcept { return quant_; }

  [[nodiscard]] std::int64_t in() const noexcept { return weight_.value.rows(); }
  [[nodiscard]] std::int64_t out() const noexcept { return weight_.value.cols(); }
  [[nodiscard]] bool has_bias() const noexcept { return has_bias_; }
  [[nodiscard]] Param<T>& weight() noexcept { return weight_; }
  [[nodiscard]] const Param<T>& weight() const noexcept { return weight_; }
  // Only meaningful when has_bias().
  [[nodiscard]] Param<T>& bias() noexcept { return bias_; }
  [[nodiscard]] const Param<T>& bias() const noexcept { return bias_; }

 private:
  Param<T> weight_;
  Param<T> bias_;
  bool has_bias_;
  LayerQuant quant_;
  Rng quant_rng_{0};
};

}  // namespace testbed::train
