// CUDA twins of a few CPU kernels (GELU forward and backward, layer norm forward, row
// softmax), float only, tested against the CPU versions. Arguments are host arrays: the
// functions copy to the GPU, run the kernel and copy back, which is what the tests need.
// Built without CUDA, or run without a usable GPU, every function returns Unavailable.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace testbed::train::cuda {

// True when the library was built with CUDA and a GPU answers (any error from the runtime,
// such as a missing driver, means no).
[[nodiscard]] bool Available() noexcept;

[[nodiscard]] absl::Status GeluForward(const float* x, float* y, std::int64_t n);
[[nodiscard]] absl::Status GeluBackward(const float* x, const float* dy, float* dx, std::int64_t n);
// Row-wise over [rows, cols]; gamma and beta have cols entries.
[[nodiscard]] absl::Status LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                                            std::int64_t rows, std::int64_t cols, float eps);
[[nodiscard]] absl::Status SoftmaxRows(const float* x, float* y, std::int64_t rows, std::int64_t cols);

}  // namespace testbed::train::cuda
