// Host-side launchers of the CUDA twins, compiled by nvcc. Plain types only (no Abseil in
// CUDA translation units); each returns a cudaError_t value, 0 on success, and copies its
// host arguments to the GPU and the results back.
#pragma once

#include <cstdint>

namespace testbed::train::cuda_detail {

// Number of GPUs, or -1 when the runtime fails (no driver, for instance).
int DeviceCount() noexcept;
const char* ErrorString(int code) noexcept;

int GeluForward(const float* x, float* y, std::int64_t n) noexcept;
int GeluBackward(const float* x, const float* dy, float* dx, std::int64_t n) noexcept;
int LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, std::int64_t rows,
                     std::int64_t cols, float eps) noexcept;
int SoftmaxRows(const float* x, float* y, std::int64_t rows, std::int64_t cols) noexcept;

}  // namespace testbed::train::cuda_detail
