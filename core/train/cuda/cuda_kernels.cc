// The public CUDA twins (testbed/train/cuda_kernels.h) over the nvcc-compiled launchers,
// turning CUDA error codes into absl::Status.
#include "testbed/train/cuda_kernels.h"

#include "absl/strings/str_cat.h"
#include "cuda_launch.h"

namespace testbed::train::cuda {
namespace {

absl::Status Check(int code, const char* what) {
  if (code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cuda_detail::ErrorString(code)));
}

absl::Status Ready() {
  if (!Available()) return absl::UnavailableError("no usable GPU");
  return absl::OkStatus();
}

}  // namespace

bool Available() noexcept { return cuda_detail::DeviceCount() > 0; }

absl::Status GeluForward(const float* x, float* y, std::int64_t n) {
  if (absl::Status s = Ready(); !s.ok()) return s;
  return Check(cuda_detail::GeluForward(x, y, n), "gelu forward");
}

absl::Status GeluBackward(const float* x, const float* dy, float* dx, std::int64_t n) {
  if (absl::Status s = Ready(); !s.ok()) return s;
  return Check(cuda_detail::GeluBackward(x, dy, dx, n), "gelu backward");
}

absl::Status LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, std::int64_t rows,
                              std::int64_t cols, float eps) {
  if (absl::Status s = Ready(); !s.ok()) return s;
  return Check(cuda_detail::LayerNormForward(x, gamma, beta, y, rows, cols, eps), "layer norm forward");
}

absl::Status SoftmaxRows(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  if (absl::Status s = Ready(); !s.ok()) return s;
  return Check(cuda_detail::SoftmaxRows(x, y, rows, cols), "softmax");
}

}  // namespace testbed::train::cuda
