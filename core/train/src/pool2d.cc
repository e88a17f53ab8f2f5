#include "testbed/train/pool2d.h"

#include "absl/strings/str_cat.h"
#include "shape_checks.h"
#include "testbed/status_macros.h"

namespace testbed::train {
namespace {

std::int64_t OutSize(std::int64_t in, std::int64_t kernel, std::int64_t stride) noexcept {
  if (stride < 1 || kernel < 1 || in < kernel) return 0;
  return (in - kernel) / stride + 1;
}

}  // namespace

template <typename T>
MaxPool2d<T>::MaxPool2d(const std::string& name, std::int64_t channels, std::int64_t height, std::int64_t width,
                        std::int64_t kernel, std::int64_t stride)
    : name_(name), channels_(channels), height_(height), width_(width), kernel_(kernel), stride_(stride) {}

template <typename T>
std::int64_t MaxPool2d<T>::out_height() const noexcept {
  return OutSize(height_, kernel_, stride_);
}

template <typename T>
std::int64_t MaxPool2d<T>::out_width() const noexcept {
  return OutSize(width_, kernel_, stride_);
}

template <typename T>
absl::Status MaxPool2d<T>::Validate() const {
  if (channels_ < 1 || height_ < 1 || width_ < 1 || kernel_ < 1 || stride_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": max_pool2d needs positive sizes; got channels ", channels_,
                                                   ", input ", height_, "x", width_, ", kernel ", kernel_, ", stride ",
                                                   stride_));
  }
  if (kernel_ > height_ || kernel_ > width_) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": a ", kernel_, "x", kernel_, " window does not fit the ",
                                                   height_, "x", width_, " input"));
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<Matrix<T>> MaxPool2d<T>::Forward(const Matrix<T>& x, LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(Validate());
  TESTBED_RETURN_IF_ERROR(CheckCols(name_, "input", x.cols(), input_size()));
  const std::int64_t oh_n = out_height(), ow_n = out_width();
  Matrix<T> y(x.rows(), output_size());
  std::vector<std::int64_t> argmax(static_cast<size_t>(y.size()));
  for (Eigen::Index n = 0; n < x.rows(); ++n) {
    const T* xn = x.data() + n * x.cols();
    for (std::int64_t c = 0; c < channels_; ++c) {
      for (std::int64_t oh = 0; oh < oh_n; ++oh) {
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          std::int64_t best = (c * height_ + oh * stride_) * width_ + ow * stride_;
          for (std::int64_t kh = 0; kh < kernel_; ++kh) {
            for (std::int64_t kw = 0; kw < kernel_; ++kw) {
              const std::int64_t at = (c * height_ + oh * stride_ + kh) * width_ + ow * stride_ + kw;
              if (xn[at] > xn[best]) best = at;
            }
          }
          const std::int64_t out = (c * oh_n + oh) * ow_n + ow;
          y(n, out) = xn[best];
          argmax[static_cast<size_t>(n * y.cols() + out)] = best;
        }
      }
    }
  }
  cache.Clear();
  cache.indices.push_back(std::move(argmax));
  return y;
}

template <typename T>
absl::StatusOr<Matrix<T>> MaxPool2d<T>::Backward(const Matrix<T>& dy, const LayerCache<T>& cache) {
  TESTBED_RETURN_IF_ERROR(Validate());
  TESTBED_RETURN_IF_ERROR(CheckCache(name_, cache.indices.size() == 1));
  TESTBED_RETURN_IF_ERROR(CheckCols(name_, "output gradient", dy.cols(), output_size()));
  const std::vector<std::int64_t>& argmax = cache.indices[0];
  if (argmax.size() != static_cast<size_t>(dy.size())) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": output gradient has ", dy.rows(),
                                                   " rows, the forward pass had ", argmax.size() / dy.cols()));
  }
  Matrix<T> dx = Matrix<T>::Zero(dy.rows(), input_size());
  for (Eigen::Index n = 0; n < dy.rows(); ++n) {
    for (Eigen::Index o = 0; o < dy.cols(); ++o) dx(n, argmax[static_cast<size_t>(n * dy.cols() + o)]) += dy(n, o);
  }
  return dx;
}

template class MaxPool2d<float>;
template class MaxPool2d<double>;

}  // namespace testbed::train
