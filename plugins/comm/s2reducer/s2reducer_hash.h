// The count sketch's hash functions, shared by the CPU code and the CUDA kernels so that both
// send every element to the same column with the same sign. Plain C++17: nvcc includes it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define S2R_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define S2R_HOST_DEVICE inline
#endif

namespace testbed::s2reducer {

// The splitmix64 finaliser: a bijection on 64-bit words in which every output bit depends on
// every input bit, cheap enough to evaluate once per (element, row).
S2R_HOST_DEVICE std::uint64_t Mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Each row gets its own seed derived from the user's seed, so rows hash independently.
S2R_HOST_DEVICE std::uint64_t RowSeed(std::uint64_t seed, int row) {
  return Mix64(seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(row) + 1);
}

// Where element `index` goes in a row: column from the low 32 bits (multiply-shift, no
// division, unbiased enough for any column count below 2^32) and sign from the top bit, so
// the two are computed from disjoint bits of one hash.
struct Slot {
  std::uint32_t column;
  float sign;
};

S2R_HOST_DEVICE Slot Locate(std::uint64_t row_seed, std::uint64_t index, std::uint32_t columns) {
  const std::uint64_t h = Mix64(index + row_seed);
  Slot s;
  s.column = static_cast<std::uint32_t>(((h & 0xffffffffull) * columns) >> 32);
  s.sign = (h >> 63) != 0 ? -1.0f : 1.0f;
  return s;
}

}  // namespace testbed::s2reducer
