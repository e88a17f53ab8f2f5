// Rectified linear activation, relu(x) = max(x, 0), element-wise. Its derivative is taken
// as 0 at x = 0.
#pragma once

#include "testbed/train/layer.h"

namespace testbed::train {

template <typename T>
class Relu final : public Layer<T> {
 public:
  [[nodiscard]] std::string kind() const override { return "relu"; }
  // Any shape; caches the output y (y > 0 exactly where x > 0).
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  // dx = dy where y > 0, else 0.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<Relu>(*this); }
};

}  // namespace testbed::train
