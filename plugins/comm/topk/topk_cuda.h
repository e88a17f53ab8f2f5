// CUDA twin of SelectTopK (topk_select.h): same threshold, same tie rule, same index order,
// so its outputs equal the CPU's bit for bit. Host buffers in and out; the kernels run on
// device copies. Built only with CUDA (then TESTBED_TOPK_HAS_CUDA is defined). C++17 for nvcc.
#pragma once

#include <cstdint>
#include <string>

namespace testbed::topk {

// False when the CUDA runtime reports any error (no driver, no device): callers skip.
[[nodiscard]] bool CudaDeviceAvailable() noexcept;

// As SelectTopK with n values; `residual` may be null (no error feedback). On success returns
// "" and sets *nonfinite; on failure returns what failed.
[[nodiscard]] std::string SelectTopKCuda(const float* gradient, float* residual, std::int64_t n, std::int64_t k,
                                         std::uint32_t* indices, float* values, std::int64_t* nonfinite);

}  // namespace testbed::topk
