// What CASQ does to one value, shared by the CPU code and the CUDA kernels so that both make
// the same histogram, draw the same random numbers and emit the same codes: histogram binning,
// the counter-based random stream for stochastic rounding, the rounding rule and code packing.
// Plain C++17: nvcc includes it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CASQ_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CASQ_HOST_DEVICE inline
#endif

namespace testbed::casq {

inline constexpr int kMaxBits = 8;
inline constexpr int kMaxLevels = 1 << kMaxBits;
inline constexpr int kMaxHistogramBins = 4096;

// splitmix64's finaliser: every output bit depends on every input bit.
CASQ_HOST_DEVICE std::uint64_t Mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// One random stream per (seed, rank, step): ranks round independently, steps differ, and a
// run is reproducible.
CASQ_HOST_DEVICE std::uint64_t StreamKey(std::uint64_t seed, std::uint64_t rank, std::uint64_t step) {
  return Mix64(Mix64(seed + 0x9e3779b97f4a7c15ull * (rank + 1)) + 0xd1b54a32d192ed03ull * (step + 1));
}

// Uniform in [0, 1) with 24 random bits: exactly representable, the same on every device.
CASQ_HOST_DEVICE float Uniform(std::uint64_t stream, std::uint64_t index) {
  return static_cast<float>(Mix64(stream + index) >> 40) * (1.0f / 16777216.0f);
}

// Histogram over [lo, hi] in `bins` equal bins; scale = bins / (hi - lo), 0 when the range is
// empty or not representable (then everything falls in bin 0).
struct HistogramSpec {
  float lo = 0.0f;
  float hi = 0.0f;
  int bins = 1;
  float scale = 0.0f;
};

CASQ_HOST_DEVICE int BinOf(float v, const HistogramSpec& h) {
  // v >= lo, so v - lo >= 0 after rounding too; the product may round up to `bins` at v = hi.
  const float t = (v - h.lo) * h.scale;
  const int b = static_cast<int>(t);
  return b < h.bins ? b : h.bins - 1;
}

// Stochastic rounding of v to one of the two levels around it: the upper one with probability
// (v - lower) / (upper - lower), so the expected result is v. `levels` is sorted, holds
// `count` values, levels[0] <= v <= levels[count - 1].
CASQ_HOST_DEVICE int RoundToLevel(float v, const float* levels, int count, float u) {
  int j = 0;
  for (int t = 1; t < count; ++t) j += levels[t] <= v;
  if (j == count - 1) return j;
  const float lower = levels[j];
  const float upper = levels[j + 1];  // > v >= lower, by the choice of j
  // u < (v - lower) / (upper - lower), without the division (it sat on the critical path).
  // No addition follows the product, so no device fuses it into an FMA: CPU and GPU agree.
  return u * (upper - lower) < v - lower ? j + 1 : j;
}

// Codes of `bits` bits, floor(64 / bits) to a 64-bit word, none straddling two words.
CASQ_HOST_DEVICE int CodesPerWord(int bits) { return 64 / bits; }

}  // namespace testbed::casq
