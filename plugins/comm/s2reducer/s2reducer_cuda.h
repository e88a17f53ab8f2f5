// CUDA twins of EncodeSketch and DecodeSketch (sketch_codec.h). They take and return host
// buffers and run on device copies, so tests compare them with the CPU functions directly.
// Built only with CUDA (then TESTBED_S2REDUCER_HAS_CUDA is defined). Plain C++17 for nvcc.
#pragma once

#include <cstdint>
#include <string>

#include "sketch_shape.h"

namespace testbed::s2reducer {

// False when the CUDA runtime reports any error (no driver, no device): callers skip.
[[nodiscard]] bool CudaDeviceAvailable() noexcept;

// Same outputs as EncodeSketch. Counters are summed with atomic adds in no fixed order, so
// they equal the CPU's bit for bit where the float additions are exact (small dyadic values,
// as in the tests) and to rounding otherwise. Returns "" on success, else what failed.
[[nodiscard]] std::string EncodeSketchCuda(const SketchShape& shape, const float* gradient, std::uint64_t* bitmap,
                                           float* sketch, std::int64_t* nonzeros, std::int64_t* nonfinite);

// Same output as DecodeSketch, bit for bit (the median and the division are the same
// operations on the same counters). Returns "" on success, else what failed.
[[nodiscard]] std::string DecodeSketchCuda(const SketchShape& shape, const std::uint64_t* bitmap, const float* sketch,
                                           int divisor, float* out);

}  // namespace testbed::s2reducer
