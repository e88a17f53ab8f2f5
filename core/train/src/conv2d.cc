#include "testbed/train/conv2d.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"
#include "testbed/train/gemm.h"

namespace testbed::train {
namespace {

std::int64_t OutSize(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t padding) noexcept {
  if (stride < 1 || kernel < 1 || in + 2 * padding < kernel) return 0;
  return (in + 2 * padding - kernel) / stride + 1;
}

// c = op(a) op(b) + beta c, with the float GEMM backend of the calling thread or, for double
// (gradient checks), Eigen. c is resized when beta == 0.
template <typename T>
absl::Status Product(const Matrix<T>& a, bool transpose_a, const Matrix<T>& b, bool transpose_b, T beta,
                     Matrix<T>& c) {
  if constexpr (std::is_same_v<T, float>) {
    return ThreadGemm().Gemm(a, transpose_a, b, transpose_b, beta, c);
  } else {
    if (beta == T(0)) {
      c.setZero(transpose_a ? a.cols() : a.rows(), transpose_b ? b.rows() : b.cols());
    } else {
      c *= beta;
    }
    if (!transpose_a && !transpose_b) {
      c.noalias() += a * b;
    } else if (transpose_a && !transpose_b) {
      c.noalias() += a.transpose() * b;
    } else if (!transpose_a) {
      c.noalias() += a * b.transpose();
    } else {
      c.noalias() += a.transpose() * b.transpose();
    }
    return absl::OkStatus();
  }
}

// Input pixel (c, ih, iw) read by kernel tap (kh, kw) at output pixel (oh, ow):
// ih = oh * stride - padding + kh, iw = ow * stride - padding + kw. The patch matrix `col`
// is [patch_size, batch * out_h * out_w]: row (c * k + kh) * k + kw, column
// n * out_h * out_w + oh * out_w + ow. Taps that fall in the zero padding are 0.
template <typename T>
void Im2col(const Conv2dShape& s, const Matrix<T>& x, Matrix<T>& col) {
  const std::int64_t oh_n = s.out_height(), ow_n = s.out_width(), pixels = oh_n * ow_n;
  const std::int64_t batch = x.rows();
  col.setZero(s.patch_size(), batch * pixels);
  for (std::int64_t n = 0; n < batch; ++n) {
    const T* xn = x.data() + n * x.cols();
    for (std::int64_t c = 0; c < s.in_channels; ++c) {
      for (std::int64_t kh = 0; kh < s.kernel; ++kh) {
        for (std::int64_t kw = 0; kw < s.kernel; ++kw) {
          T* dst = col.data() + ((c * s.kernel + kh) * s.kernel + kw) * col.cols() + n * pixels;
          for (std::int64_t oh = 0; oh < oh_n; ++oh) {
            const std::int64_t ih = oh * s.stride - s.padding + kh;
            if (ih < 0 || ih >= s.height) continue;
            const T* src = xn + (c * s.height + ih) * s.width;
            for (std::int64_t ow = 0; ow < ow_n; ++ow) {
              const std::int64_t iw = ow * s.stride - s.padding + kw;
              if (iw >= 0 && iw < s.width) dst[oh * ow_n + ow] = src[iw];
            }
          }
        }
      }
    }
  }
}

// The adjoint of Im2col: adds every patch entry of `col` into the input pixel it was read
// from (overlapping windows accumulate). dx must be [batch, input_size] and zeroed.
template <typename T>
void Col2im(const Conv2dShape& s, const Matrix<T>& col, Matrix<T>& dx) {
  const std::int64_t oh_n = s.out_height(), ow_n = s.out_width(), pixels = oh_n * ow_n;
  for (std::int64_t n = 0; n < dx.rows(); ++n) {
    T* dxn = dx.data() + n * dx.cols();
    for (std::int64_t c = 0; c < s.in_channels; ++c) {
      for (std::int64_t kh = 0; kh < s.kernel; ++kh) {
        for (std::int64_t kw = 0; kw < s.kernel; ++kw) {
          const T* src = col.data() + ((c * s.kernel + kh) * s.kernel + kw) * col.cols() + n * pixels;
          for (std::int64_t oh = 0; oh < oh_n; ++oh) {
            const std::int64_t ih = oh * s.stride - s.padding + kh;
            if (ih < 0 || ih >= s.height) continue;
            T* dst = dxn + (c * s.height + ih) * s.width;
            for (std::int64_t ow = 0; ow < ow_n; ++ow) {
              const std::int64_t iw = ow * s.stride - s.padding + kw;
              if (iw >= 0 && iw < s.width) dst[iw] += src[oh * ow_n + ow];
            }
          }
        }
      }
    }
  }
}

}  // namespace

std::int64_t Conv2dShape::out_height() const noexcept { return OutSize(height, kernel, stride, padding); }
std::int64_t Conv2dShape::out_width() const noexcept { return OutSize(width, kernel, stride, padding); }

absl::Status Conv2dShape::Validate(const std::string& layer) const {
  if (in_channels < 1 || out_channels < 1 || height < 1 || width < 1 || kernel < 1 || stride < 1 || padding < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        layer, ": conv2d needs positive channels, input size, kernel and stride and padding >= 0; got in_channels ",
        in_channels, ", out_channels ", out_channels, ", input ", height, "x", width, ", kernel ", kernel, ", stride ",
        stride, ", padding ", padding));
  }
  if (out_height() < 1 || out_width() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(layer, ": a ", kernel, "x", kernel, " kernel does not fit the ",
                                                   height, "x", width, " input with padding ", padding));
  }
  return absl::OkStatus();
}

template <typename T>
Conv2d<T>::Conv2d(const std::string& name, std::int64_t in_channels, std::int64_t out_channels, std::int64_t height,
                  std::int64_t width, std::int64_t kernel, std::int64_t stride, std::int64_t padding, bool bias,
                  Rng& rng, double init_std)
    : name_(name),
      shape_{.in_channels = in_channels,
             .out_channels = out_channels,
             .height = height,
             .width = width,
             .kernel = kernel,
             .stride = stride,
             .padding = padding},
      has_bias_(bias) {
  // Sizes clamped at 0 so that a rejected geometry still constructs (Forward reports it).
  const std::int64_t rows = std::max<std::int64_t>(0, out_channels);
  const std::int64_t patch = in_channels > 0 && kernel > 0 ? shape_.patch_size() : 0;
  const double std = init_std > 0 ? init_std : 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(1, patch)));
  Matrix<T> w(rows, patch);
  for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = static_cast<T>(rng.Normal() * std);
  weight_ = Param<T>(name + ".weight", std::move(w));
  bias_ = Param<T>(name + ".bias", Matrix<T>::Zero(1, bias ? rows : 0));
}

template <typename T>
absl::Status Conv2d<T>::SetQuantization(const LayerQuant& q) {
  TESTBED_RETURN_IF_ERROR(CheckBits(q.weight_bits, name_ + ": weight width"));
  TESTBED_RETURN_IF_ERROR(CheckBits(q.activation_bits, name_ + ": activation width"));
  TESTBED_RETURN_IF_ERROR(CheckBits(q.gradient_bits, name_ + ": gradient width"));
  quant_ = q;
  quant_rng_ = Rng(q.seed);
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<Matrix<T>> Conv2d<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(shape_.Validate(name_));
  TESTBED_RETURN_IF_ERROR(CheckCols(name_, "input", x.cols(), shape_.input_size()));
  cache.Clear();
  // Full precision keeps x only; quantised keeps the rounded input and weights, which the
  // backward products use (the weights may be updated before a pipelined backward runs).
  const bool quantised = !quant_.full_precision();
  cache.tensors.push_back(quantised ? FakeQuantize(x, quant_.activation_bits, Rounding::kNearest, nullptr) : x);
  if (quantised) cache.tensors.push_back(FakeQuantize(weight_.value, quant_.weight_bits, Rounding::kNearest, nullptr));
  const Matrix<T>& w = quantised ? cache.tensors[1] : weight_.value;
  Matrix<T> col;
  Im2col(shape_, cache.tensors[0], col);
  Matrix<T> product;  // [out_channels, batch * pixels]
  TESTBED_RETURN_IF_ERROR(Product(w, false, col, false, T(0), product));
  const std::int64_t pixels = shape_.out_height() * shape_.out_width();
  Matrix<T> y(x.rows(), shape_.output_size());
  for (Eigen::Index n = 0; n < x.rows(); ++n) {
    for (Eigen::Index oc = 0; oc < shape_.out_channels; ++oc) {
      auto dst = y.row(n).segment(oc * pixels, pixels);
      dst = product.row(oc).segment(n * pixels, pixels);
      if (has_bias_) dst.array() += bias_.value(0, oc);
    }
  }
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> Conv2d<T>::Backward(const Matrix<T>& dy_in, const LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(shape_.Validate(name_));
  const bool quantised = cache.tensors.size() == 2;
  TESTBED_RETURN_IF_ERROR(CheckCache(name_, cache.tensors.size() == 1 || quantised));
  const Matrix<T>& x = cache.tensors[0];  // Q_a(x) when quantised
  const Matrix<T>& w = quantised ? cache.tensors[1] : weight_.value;
  TESTBED_RETURN_IF_ERROR(CheckCols(name_, "input in the cache", x.cols(), shape_.input_size()));
  TESTBED_RETURN_IF_ERROR(CheckCols(name_, "output gradient", dy_in.cols(), shape_.output_size()));
  TESTBED_RETURN_IF_ERROR(CheckRows(name_, "output gradient", dy_in.rows(), x.rows()));
  if (quantised && (w.rows() != weight_.value.rows() || w.cols() != weight_.value.cols())) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": the cached weights do not have the layer's shape"));
  }
  Matrix<T> rounded;
  if (quantised && quant_.gradient_bits < 32) {
    rounded = FakeQuantize(dy_in, quant_.gradient_bits, quant_.gradient_rounding, &quant_rng_);
  }
  const Matrix<T>& dy = rounded.size() > 0 ? rounded : dy_in;
  const std::int64_t pixels = shape_.out_height() * shape_.out_width();
  // dy in the layout of the forward product: [out_channels, batch * pixels].
  Matrix<T> dproduct(shape_.out_channels, dy.rows() * pixels);
  for (Eigen::Index n = 0; n < dy.rows(); ++n) {
    for (Eigen::Index oc = 0; oc < shape_.out_channels; ++oc) {
      dproduct.row(oc).segment(n * pixels, pixels) = dy.row(n).segment(oc * pixels, pixels);
    }
  }
  if (has_bias_) bias_.grad.row(0) += dproduct.rowwise().sum().transpose();
  Matrix<T> col;
  Im2col(shape_, x, col);
  TESTBED_RETURN_IF_ERROR(Product(dproduct, false, col, true, T(1), weight_.grad));
  Matrix<T> dcol;
  TESTBED_RETURN_IF_ERROR(Product(w, true, dproduct, false, T(0), dcol));
  Matrix<T> dx = Matrix<T>::Zero(x.rows(), x.cols());
  Col2im(shape_, dcol, dx);
  return dx;
}

template <typename T>
std::vector<Param<T>*> Conv2d<T>::Params() {
  if (has_bias_) return {&weight_, &bias_};
  return {&weight_};
}

template class Conv2d<float>;
template class Conv2d<double>;

}  // namespace testbed::train
