// 2-D convolution over image activations. An activation row is one sample, its columns
// the feature map flattened channel first, then row, then column (NCHW per row): element
// (c, h, w) of sample n is x(n, (c * height + h) * width + w). Computed as im2col followed
// by one matrix product over the whole batch (the thread's GEMM backend for float, as
// Linear uses; Eigen for double).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "testbed/train/layer.h"
#include "testbed/train/rng.h"

namespace testbed::train {

// The geometry of a square-kernel convolution, and what follows from it.
struct Conv2dShape {
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  std::int64_t height = 0;  // input rows
  std::int64_t width = 0;   // input columns
  std::int64_t kernel = 0;  // kernel rows = kernel columns
  std::int64_t stride = 1;
  std::int64_t padding = 0;  // zero rows/columns added on every side

  // floor((height + 2 padding - kernel) / stride) + 1; 0 when the kernel does not fit.
  [[nodiscard]] std::int64_t out_height() const noexcept;
  [[nodiscard]] std::int64_t out_width() const noexcept;
  // Activation widths: in_channels * height * width, out_channels * out_height * out_width.
  [[nodiscard]] std::int64_t input_size() const noexcept { return in_channels * height * width; }
  [[nodiscard]] std::int64_t output_size() const noexcept { return out_channels * out_height() * out_width(); }
  // Weights per output channel: in_channels * kernel * kernel.
  [[nodiscard]] std::int64_t patch_size() const noexcept { return in_channels * kernel * kernel; }
  // Multiply-accumulates of one sample's forward pass: out_c * out_h * out_w * in_c * k * k.
  [[nodiscard]] std::int64_t MacsPerSample() const noexcept { return output_size() * patch_size(); }
  // Weights plus, with `bias`, one bias per output channel.
  [[nodiscard]] std::int64_t NumParameters(bool bias) const noexcept {
    return out_channels * patch_size() + (bias ? out_channels : 0);
  }
  // InvalidArgument naming `layer` unless every size is positive, padding >= 0 and the
  // kernel fits the padded input.
  [[nodiscard]] absl::Status Validate(const std::string& layer) const;
};

template <typename T>
class Conv2d final : public Layer<T> {
 public:
  // Weight ~ N(0, init_std^2), with init_std <= 0 meaning 1/sqrt(in_channels * kernel^2) (as
  // Linear's 1/sqrt(in)); bias = 0. A geometry that Conv2dShape::Validate rejects makes
  // Forward and Backward return that error.
  Conv2d(const std::string& name, std::int64_t in_channels, std::int64_t out_channels, std::int64_t height,
         std::int64_t width, std::int64_t kernel, std::int64_t stride, std::int64_t padding, bool bias, Rng& rng,
         double init_std = 0);

  [[nodiscard]] std::string kind() const override { return "conv2d"; }
  // x: [batch, in_channels * height * width] -> [batch, out_channels * out_height * out_width].
  // Caches x (im2col is recomputed in Backward rather than kept: kernel^2 times smaller);
  // quantised, the rounded x and the rounded weights instead.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::vector<Param<T>*> Params() override;
  // Quantised as Linear: y = conv(Q_a(x), Q_w(W)) + b with nearest rounding (each tensor
  // scaled as a whole: the batch's input, all the weights); backward rounds dL/dy to
  // gradient_bits (with gradient_rounding and this layer's Rng, seeded from q.seed) and passes
  // it through the quantisers unchanged (straight-through): dL/dW from the patches of Q_a(x),
  // dL/dx through Q_w(W), dL/db the sum of the rounded dL/dy. 32 bits everywhere: the
  // full-precision layer, bit for bit. InvalidArgument for an unsupported width.
  [[nodiscard]] absl::Status SetQuantization(const LayerQuant& q) override;
  [[nodiscard]] const LayerQuant& quantization() const noexcept { return quant_; }
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<Conv2d>(*this); }

  [[nodiscard]] const Conv2dShape& shape() const noexcept { return shape_; }
  [[nodiscard]] std::int64_t in_channels() const noexcept { return shape_.in_channels; }
  [[nodiscard]] std::int64_t out_channels() const noexcept { return shape_.out_channels; }
  [[nodiscard]] std::int64_t out_height() const noexcept { return shape_.out_height(); }
  [[nodiscard]] std::int64_t out_width() const noexcept { return shape_.out_width(); }
  [[nodiscard]] std::int64_t MacsPerSample() const noexcept { return shape_.MacsPerSample(); }
  [[nodiscard]] std::int64_t NumParameters() const noexcept { return shape_.NumParameters(has_bias_); }
  [[nodiscard]] bool has_bias() const noexcept { return has_bias_; }
  // [out_channels, in_channels * kernel * kernel]; column (c * kernel + kh) * kernel + kw
  // weighs input channel c at kernel row kh, column kw.
  [[nodiscard]] Param<T>& weight() noexcept { return weight_; }
  [[nodiscard]] const Param<T>& weight() const noexcept { return weight_; }
  // [1, out_channels]. Only meaningful when has_bias().
  [[nodiscard]] Param<T>& bias() noexcept { return bias_; }
  [[nodiscard]] const Param<T>& bias() const noexcept { return bias_; }

 private:
  std::string name_;
  Conv2dShape shape_;
  Param<T> weight_;
  Param<T> bias_;
  bool has_bias_;
  LayerQuant quant_;
  Rng quant_rng_{0};  // stochastic rounding of the output gradient
};

}  // namespace testbed::train
