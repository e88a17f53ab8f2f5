#include "casq_cuda.h"

#include <cuda_runtime.h>

#include "testbed/cuda/device_buffer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "codebook.h"
#include "element_rules.h"

namespace testbed::casq {
namespace {

using cuda::DeviceBuffer;
using cuda::Failed;

int Grid(std::int64_t threads) { return static_cast<int>(std::min<std::int64_t>((threads + 255) / 256, 8192)); }

// Floats mapped to unsigned integers in the same order, so atomicMin/Max find exact extremes.
__device__ unsigned OrderedKey(float f) {
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}
__host__ float FromOrderedKey(unsigned k) {
  const unsigned b = (k & 0x80000000u) != 0 ? (k & 0x7fffffffu) : ~k;
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

struct ScanOut {
  unsigned long long nonzeros;
  unsigned long long nonfinite;
  unsigned min_key;
  unsigned max_key;
};

// One warp per bitmap word: two ballots make the word; lanes track the range of their finite
// non-zeros, reduced across the warp before one atomic each.
__global__ void ScanKernel(const float* g, std::int64_t n, std::int64_t words, std::uint64_t* bitmap, ScanOut* out) {
  const int lane = threadIdx.x & 31;
  const std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const std::int64_t stride = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  unsigned lo = 0xffffffffu, hi = 0u;
  unsigned long long bad = 0;
  for (std::int64_t w = first; w < words; w += stride) {
    const std::int64_t i0 = 64 * w + lane;
    const std::int64_t i1 = i0 + 32;
    const float v0 = i0 < n ? g[i0] : 0.0f;
    const float v1 = i1 < n ? g[i1] : 0.0f;
    const unsigned b0 = __ballot_sync(0xffffffffu, v0 != 0.0f);
    const unsigned b1 = __ballot_sync(0xffffffffu, v1 != 0.0f);
    if (lane == 0) {
      bitmap[w] = (static_cast<std::uint64_t>(b1) << 32) | b0;
      atomicAdd(&out->nonzeros, static_cast<unsigned long long>(__popc(b0) + __popc(b1)));
    }
    const float pair[2] = {v0, v1};
    for (int t = 0; t < 2; ++t) {
      const float v = pair[t];
      if (v == 0.0f) continue;
      if (!isfinite(v)) {
        ++bad;
        continue;
      }
      lo = min(lo, OrderedKey(v));
      hi = max(hi, OrderedKey(v));
    }
  }
  for (int d = 16; d > 0; d >>= 1) {
    lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, d));
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, d));
    bad += __shfl_xor_sync(0xffffffffu, bad, d);
  }
  if (lane == 0) {
    atomicMin(&out->min_key, lo);
    atomicMax(&out->max_key, hi);
    if (bad != 0) atomicAdd(&out->nonfinite, bad);
  }
}

__device__ bool Coded(bool sparse, const std::uint64_t* bitmap, std::int64_t i) {
  return !sparse || ((bitmap[i >> 6] >> (i & 63)) & 1ull) != 0;
}

__device__ std::int64_t PositionOf(bool sparse, const std::uint64_t* bitmap, const std::int64_t* prefix, std::int64_t i) {
  if (!sparse) return i;
  const std::uint64_t below = bitmap[i >> 6] & ((1ull << (i & 63)) - 1ull);
  return prefix[i >> 6] + __popcll(below);
}

__global__ void HistogramKernel(const float* g, std::int64_t n, bool sparse, const std::uint64_t* bitmap,
                                HistogramSpec spec, unsigned long long* histogram) {
  __shared__ unsigned int local[kMaxHistogramBins];
  for (int b = threadIdx.x; b < spec.bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (Coded(sparse, bitmap, i)) atomicAdd(&local[BinOf(g[i], spec)], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < spec.bins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&histogram[b], static_cast<unsigned long long>(local[b]));
  }
}

struct Levels {
  float v[kMaxLevels];
  int count;
};

__global__ void QuantizeKernel(const float* g, std::int64_t n, bool sparse, const std::uint64_t* bitmap,
                               const std::int64_t* prefix, Levels levels, int bits, std::uint64_t stream,
                               unsigned long long* codes) {
  __shared__ float shared_levels[kMaxLevels];
  for (int t = threadIdx.x; t < levels.count; t += blockDim.x) shared_levels[t] = levels.v[t];
  __syncthreads();
  const int per_word = CodesPerWord(bits);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (!Coded(sparse, bitmap, i)) continue;
    const std::int64_t p = PositionOf(sparse, bitmap, prefix, i);
    const float u = Uniform(stream, static_cast<std::uint64_t>(i));
    const auto code = static_cast<unsigned long long>(RoundToLevel(g[i], shared_levels, levels.count, u));
    atomicOr(&codes[p / per_word], code << (bits * (p % per_word)));
  }
}

__global__ void AccumulateKernel(std::int64_t n, bool sparse, const std::uint64_t* bitmap, const std::int64_t* prefix,
                                 const std::uint64_t* codes, Levels levels, int bits, float* out) {
  const int per_word = CodesPerWord(bits);
  const std::uint64_t mask = (1ull << bits) - 1ull;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (!Coded(sparse, bitmap, i)) continue;
    const std::int64_t p = PositionOf(sparse, bitmap, prefix, i);
    const std::uint64_t code = (codes[p / per_word] >> (bits * (p % per_word))) & mask;
    out[i] += levels.v[code];
  }
}

__global__ void DivideKernel(float* out, std::int64_t n, float divisor) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = out[i] / divisor;
  }
}

// Exclusive prefix of the bitmap words' popcounts: the position of a word's first coded value.
std::vector<std::int64_t> WordPrefix(const std::uint64_t* bitmap, std::int64_t words) {
  std::vector<std::int64_t> prefix(static_cast<std::size_t>(std::max<std::int64_t>(words, 1)), 0);
  std::int64_t running = 0;
  for (std::int64_t w = 0; w < words; ++w) {
    prefix[static_cast<std::size_t>(w)] = running;
    running += __builtin_popcountll(bitmap[w]);
  }
  return prefix;
}

Levels ToLevels(const float* v, int count) {
  Levels l{};
  for (int t = 0; t < count; ++t) l.v[t] = v[t];
  l.count = count;
  return l;
}

}  // namespace

bool CudaDeviceAvailable() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

std::string EncodeRankCuda(const float* gradient, std::int64_t n, const EncodeSettings& s, EncodedRank* out) {
  *out = EncodedRank{};
  const std::int64_t words = (n + 63) / 64;
  DeviceBuffer<float> d_g;
  DeviceBuffer<std::uint64_t> d_bitmap;
  DeviceBuffer<ScanOut> d_scan;
  DeviceBuffer<unsigned long long> d_hist, d_codes;
  DeviceBuffer<std::int64_t> d_prefix;
  cudaError_t e;
  if ((e = d_g.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc gradient", e);
  if ((e = d_bitmap.Allocate(words)) != cudaSuccess) return Failed("cudaMalloc bitmap", e);
  if ((e = d_scan.Allocate(1)) != cudaSuccess) return Failed("cudaMalloc scan", e);
  if ((e = d_hist.Allocate(kMaxHistogramBins)) != cudaSuccess) return Failed("cudaMalloc histogram", e);
  if ((e = cudaMemcpy(d_g.get(), gradient, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("copy gradient", e);
  const ScanOut init{0, 0, 0xffffffffu, 0u};
  if ((e = cudaMemcpy(d_scan.get(), &init, sizeof init, cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("init scan", e);
  ScanKernel<<<Grid(words * 32), 256>>>(d_g.get(), n, words, d_bitmap.get(), d_scan.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch scan", e);
  ScanOut scan;
  if ((e = cudaMemcpy(&scan, d_scan.get(), sizeof scan, cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy scan", e);
  if (scan.nonfinite != 0) {
    out->nonfinite = static_cast<std::int64_t>(scan.nonfinite);
    return {};
  }
  const auto nonzeros = static_cast<std::int64_t>(scan.nonzeros);
  const bool sparse = s.policy == PositionPolicy::kBitmap || (s.policy == PositionPolicy::kAuto && PreferBitmap(n, nonzeros, s.bits));
  out->positions = sparse ? Positions::kBitmap : Positions::kDense;
  out->count = sparse ? nonzeros : n;
  float lo = nonzeros > 0 ? FromOrderedKey(scan.min_key) : 0.0f;
  float hi = nonzeros > 0 ? FromOrderedKey(scan.max_key) : 0.0f;
  if (!sparse && nonzeros < n) {
    lo = std::min(lo, 0.0f);
    hi = std::max(hi, 0.0f);
  }
  if (out->count == 0) lo = hi = 0.0f;
  const HistogramSpec spec = MakeHistogramSpec(lo, hi, s.histogram_bins);
  if ((e = cudaMemset(d_hist.get(), 0, spec.bins * sizeof(unsigned long long))) != cudaSuccess) return Failed("clear histogram", e);
  HistogramKernel<<<Grid(n), 256>>>(d_g.get(), n, sparse, d_bitmap.get(), spec, d_hist.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch histogram", e);
  std::vector<unsigned long long> raw(static_cast<std::size_t>(spec.bins));
  if ((e = cudaMemcpy(raw.data(), d_hist.get(), spec.bins * sizeof(unsigned long long), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return Failed("copy histogram", e);
  }
  const std::vector<std::int64_t> histogram(raw.begin(), raw.end());
  out->levels = BuildCodebook(histogram, spec, {s.bits, s.clusters, s.kmeans_iterations, s.uniform}).levels;

  std::vector<std::uint64_t> bitmap(static_cast<std::size_t>(words));
  if ((e = cudaMemcpy(bitmap.data(), d_bitmap.get(), words * sizeof(std::uint64_t), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return Failed("copy bitmap", e);
  }
  const std::vector<std::int64_t> prefix = WordPrefix(bitmap.data(), words);
  if ((e = d_prefix.Allocate(static_cast<std::int64_t>(prefix.size()))) != cudaSuccess) return Failed("cudaMalloc prefix", e);
  if ((e = cudaMemcpy(d_prefix.get(), prefix.data(), prefix.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice)) != cudaSuccess) {
    return Failed("copy prefix", e);
  }
  const int per_word = CodesPerWord(s.bits);
  const std::int64_t code_words = (out->count + per_word - 1) / per_word;
  if ((e = d_codes.Allocate(code_words)) != cudaSuccess) return Failed("cudaMalloc codes", e);
  if ((e = cudaMemset(d_codes.get(), 0, std::max<std::int64_t>(code_words, 1) * sizeof(unsigned long long))) != cudaSuccess) {
    return Failed("clear codes", e);
  }
  QuantizeKernel<<<Grid(n), 256>>>(d_g.get(), n, sparse, d_bitmap.get(), d_prefix.get(),
                                   ToLevels(out->levels.data(), static_cast<int>(out->levels.size())), s.bits, s.stream,
                                   d_codes.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch quantize", e);
  out->codes.resize(static_cast<std::size_t>(code_words));
  if ((e = cudaMemcpy(out->codes.data(), d_codes.get(), code_words * sizeof(std::uint64_t), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return Failed("copy codes", e);
  }
  if (sparse) out->bitmap = std::move(bitmap);
  return {};
}

std::string DecodeRanksCuda(const RankPointers* ranks, int rank_count, std::int64_t n, int bits, int divisor, float* out) {
  DeviceBuffer<float> d_out;
  cudaError_t e;
  if ((e = d_out.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc output", e);
  if ((e = cudaMemset(d_out.get(), 0, n * sizeof(float))) != cudaSuccess) return Failed("clear output", e);
  // Ranks are added one kernel after the other on one stream: every element sees the same
  // order of additions as on the CPU.
  for (int r = 0; r < rank_count; ++r) {
    const RankPointers& rank = ranks[r];
    const bool sparse = rank.positions == Positions::kBitmap;
    DeviceBuffer<std::uint64_t> d_bitmap, d_codes;
    DeviceBuffer<std::int64_t> d_prefix;
    if ((e = d_codes.Allocate(rank.code_words)) != cudaSuccess) return Failed("cudaMalloc codes", e);
    if ((e = cudaMemcpy(d_codes.get(), rank.codes, rank.code_words * sizeof(std::uint64_t), cudaMemcpyHostToDevice)) != cudaSuccess) {
      return Failed("copy codes", e);
    }
    if ((e = d_bitmap.Allocate(rank.bitmap_words)) != cudaSuccess) return Failed("cudaMalloc bitmap", e);
    const std::vector<std::int64_t> prefix = WordPrefix(rank.bitmap, sparse ? rank.bitmap_words : 0);
    if ((e = d_prefix.Allocate(static_cast<std::int64_t>(prefix.size()))) != cudaSuccess) return Failed("cudaMalloc prefix", e);
    if (sparse) {
      if ((e = cudaMemcpy(d_bitmap.get(), rank.bitmap, rank.bitmap_words * sizeof(std::uint64_t), cudaMemcpyHostToDevice)) != cudaSuccess) {
        return Failed("copy bitmap", e);
      }
      if ((e = cudaMemcpy(d_prefix.get(), prefix.data(), prefix.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice)) != cudaSuccess) {
        return Failed("copy prefix", e);
      }
    }
    AccumulateKernel<<<Grid(n), 256>>>(n, sparse, d_bitmap.get(), d_prefix.get(), d_codes.get(),
                                       ToLevels(rank.levels, 1 << bits), bits, d_out.get());
    if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch accumulate", e);
    // The buffers of this rank are freed at the end of the iteration; cudaFree waits for the
    // kernel that uses them.
  }
  DivideKernel<<<Grid(n), 256>>>(d_out.get(), n, static_cast<float>(divisor));
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch divide", e);
  if ((e = cudaMemcpy(out, d_out.get(), n * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy output", e);
  return {};
}

}  // namespace testbed::casq
