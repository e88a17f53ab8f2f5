// CUDA twins of CopyChecked and Divide (dense_codec.h), equal to the CPU bit for bit. Host
// buffers in and out. Built only with CUDA (then TESTBED_DENSE_HAS_CUDA is defined). C++17.
#pragma once

#include <cstdint>
#include <string>

namespace testbed::dense {

// False when the CUDA runtime reports any error (no driver, no device): callers skip.
[[nodiscard]] bool CudaDeviceAvailable() noexcept;

// Returns "" on success (setting *nonfinite), else what failed.
[[nodiscard]] std::string CopyCheckedCuda(const float* gradient, std::int64_t n, float* values, std::int64_t* nonfinite);
[[nodiscard]] std::string DivideCuda(const float* summed, std::int64_t n, int divisor, float* out);

}  // namespace testbed::dense
