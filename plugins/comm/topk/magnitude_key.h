// Orders float magnitudes as unsigned integers: for finite values, |a| < |b| exactly when
// MagnitudeKey(a) < MagnitudeKey(b). Shared by the CPU selection and the CUDA kernels so that
// both pick the same threshold. Plain C++17: nvcc includes it.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TOPK_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TOPK_HOST_DEVICE inline
#endif

namespace testbed::topk {

// Keys at or above this are infinities and NaNs.
inline constexpr std::uint32_t kNonFiniteKey = 0x7f800000u;

TOPK_HOST_DEVICE std::uint32_t MagnitudeKey(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits & 0x7fffffffu;  // drop the sign: IEEE magnitudes sort like their bit patterns
}

}  // namespace testbed::topk
