// 2-D max pooling over image activations laid out as in Conv2d: one sample per row, the
// feature map flattened channel, then row, then column (NCHW per row). Each output pixel is
// the largest input in its kernel x kernel window (no padding); the backward pass routes
// the whole gradient to that input (the first one on ties), summing where windows overlap.
#pragma once

#include <cstdint>
#include <string>

#include "testbed/train/layer.h"

namespace testbed::train {

template <typename T>
class MaxPool2d final : public Layer<T> {
 public:
  // Output: floor((height - kernel) / stride) + 1 rows, likewise columns, same channels. A
  // non-positive size or a kernel larger than the input makes Forward return InvalidArgument.
  MaxPool2d(const std::string& name, std::int64_t channels, std::int64_t height, std::int64_t width,
            std::int64_t kernel, std::int64_t stride);

  [[nodiscard]] std::string kind() const override { return "max_pool2d"; }
  // x: [batch, channels * height * width] -> [batch, channels * out_height * out_width].
  // cache.indices[0] holds, for each output element in row-major order of y, the column of
  // x (within its row) that was the maximum.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<MaxPool2d>(*this); }

  [[nodiscard]] std::int64_t channels() const noexcept { return channels_; }
  [[nodiscard]] std::int64_t out_height() const noexcept;
  [[nodiscard]] std::int64_t out_width() const noexcept;
  [[nodiscard]] std::int64_t input_size() const noexcept { return channels_ * height_ * width_; }
  [[nodiscard]] std::int64_t output_size() const noexcept { return channels_ * out_height() * out_width(); }

 private:
  [[nodiscard]] absl::Status Validate() const;

  std::string name_;
  std::int64_t channels_, height_, width_, kernel_, stride_;
};

}  // namespace testbed::train
