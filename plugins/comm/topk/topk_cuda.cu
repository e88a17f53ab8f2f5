#include "topk_cuda.h"

#include <cuda_runtime.h>

#include "testbed/cuda/device_buffer.h"

#include <algorithm>
#include <vector>

#include "magnitude_key.h"

namespace testbed::topk {
namespace {

using cuda::DeviceBuffer;
using cuda::Failed;

// One thread per element of a tile; tiles are the unit of the index-order compaction.
constexpr int kTile = 1024;
constexpr int kDigitBits = 11;  // radix-select digit: 2048 shared-memory bins

__global__ void AddKernel(const float* g, float* r, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    r[i] += g[i];
  }
}

// Histogram of the digit at `shift` among the keys whose bits above the digit equal `prefix`.
__global__ void DigitHistogramKernel(const float* v, std::int64_t n, int shift, int bits, std::uint32_t prefix,
                                     unsigned long long* histogram, unsigned long long* nonfinite) {
  __shared__ unsigned int local[1 << kDigitBits];
  const int bins = 1 << bits;
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint32_t key = MagnitudeKey(v[i]);
    bad += key >= kNonFiniteKey;
    if ((key >> (shift + bits)) == prefix) atomicAdd(&local[(key >> shift) & (bins - 1)], 1u);
  }
  if (bad != 0) atomicAdd(nonfinite, bad);
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&histogram[b], static_cast<unsigned long long>(local[b]));
  }
}

// Exclusive rank of this thread's flag among the block's flags (thread order = index order).
__device__ int BlockRank(bool flag, int* warp_offsets) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  const int in_warp = __popc(ballot & ((1u << lane) - 1u));
  __syncthreads();  // warp_offsets may still be read from a previous call
  if (lane == 0) warp_offsets[warp] = __popc(ballot);
  __syncthreads();
  if (warp == 0) {
    const int x = lane < static_cast<int>(blockDim.x >> 5) ? warp_offsets[lane] : 0;
    int inclusive = x;
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += y;
    }
    warp_offsets[lane] = inclusive - x;
  }
  __syncthreads();
  return warp_offsets[warp] + in_warp;
}

struct Rule {
  std::uint32_t key;
  std::int64_t equal_needed;
};

__global__ void CountEqualKernel(const float* v, std::int64_t n, Rule rule, int* equal_counts) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const bool eq = i < n && MagnitudeKey(v[i]) == rule.key;
  const int count = __syncthreads_count(eq);
  if (threadIdx.x == 0) equal_counts[blockIdx.x] = count;
}

__device__ bool Selected(const float* v, std::int64_t n, std::int64_t i, Rule rule, const std::int64_t* equal_offsets,
                         int* warp_offsets) {
  const std::uint32_t key = i < n ? MagnitudeKey(v[i]) : 0u;
  const bool eq = i < n && key == rule.key;
  const std::int64_t equal_rank = equal_offsets[blockIdx.x] + BlockRank(eq, warp_offsets);
  return i < n && (key > rule.key || (eq && equal_rank < rule.equal_needed));
}

__global__ void CountSelectedKernel(const float* v, std::int64_t n, Rule rule, const std::int64_t* equal_offsets,
                                    int* selected_counts) {
  __shared__ int warp_offsets[32];
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const bool sel = Selected(v, n, i, rule, equal_offsets, warp_offsets);
  const int count = __syncthreads_count(sel);
  if (threadIdx.x == 0) selected_counts[blockIdx.x] = count;
}

__global__ void ScatterKernel(float* v, std::int64_t n, Rule rule, const std::int64_t* equal_offsets,
                              const std::int64_t* selected_offsets, bool zero_selected, std::uint32_t* indices,
                              float* values) {
  __shared__ int warp_offsets[32];
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const bool sel = Selected(v, n, i, rule, equal_offsets, warp_offsets);
  const std::int64_t pos = selected_offsets[blockIdx.x] + BlockRank(sel, warp_offsets);
  if (sel) {
    indices[pos] = static_cast<std::uint32_t>(i);
    values[pos] = v[i];
    if (zero_selected) v[i] = 0.0f;
  }
}

std::vector<std::int64_t> ExclusiveSum(const std::vector<int>& counts) {
  std::vector<std::int64_t> offsets(counts.size());
  std::int64_t running = 0;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    offsets[t] = running;
    running += counts[t];
  }
  return offsets;
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

std::string SelectTopKCuda(const float* gradient, float* residual, std::int64_t n, std::int64_t k,
                           std::uint32_t* indices, float* values, std::int64_t* nonfinite) {
  const std::int64_t tiles = (n + kTile - 1) / kTile;
  DeviceBuffer<float> d_v, d_g, d_values;
  DeviceBuffer<std::uint32_t> d_indices;
  DeviceBuffer<unsigned long long> d_hist, d_bad;
  DeviceBuffer<int> d_counts;
  DeviceBuffer<std::int64_t> d_equal_offsets, d_selected_offsets;
  cudaError_t e;
  if ((e = d_v.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc values", e);
  if ((e = d_values.Allocate(k)) != cudaSuccess) return Failed("cudaMalloc selected values", e);
  if ((e = d_indices.Allocate(k)) != cudaSuccess) return Failed("cudaMalloc selected indices", e);
  if ((e = d_hist.Allocate(1 << kDigitBits)) != cudaSuccess) return Failed("cudaMalloc histogram", e);
  if ((e = d_bad.Allocate(1)) != cudaSuccess) return Failed("cudaMalloc counter", e);
  if ((e = d_counts.Allocate(tiles)) != cudaSuccess) return Failed("cudaMalloc tile counts", e);
  if ((e = d_equal_offsets.Allocate(tiles)) != cudaSuccess) return Failed("cudaMalloc offsets", e);
  if ((e = d_selected_offsets.Allocate(tiles)) != cudaSuccess) return Failed("cudaMalloc offsets", e);
  const int grid = static_cast<int>(std::min<std::int64_t>((n + 255) / 256, 4096));
  // The corrected gradient lives in d_v: residual + gradient with error feedback.
  if (residual != nullptr) {
    if ((e = d_g.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc gradient", e);
    if ((e = cudaMemcpy(d_v.get(), residual, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("copy residual", e);
    if ((e = cudaMemcpy(d_g.get(), gradient, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("copy gradient", e);
    AddKernel<<<grid, 256>>>(d_g.get(), d_v.get(), n);
    if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch error feedback", e);
  } else {
    if ((e = cudaMemcpy(d_v.get(), gradient, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("copy gradient", e);
  }
  if ((e = cudaMemset(d_bad.get(), 0, sizeof(unsigned long long))) != cudaSuccess) return Failed("clear counter", e);

  // Radix select over the 31 key bits: digits of 11, 11 and 9 bits from the top.
  std::uint32_t prefix = 0;
  std::int64_t above = 0;
  const int shifts[3] = {20, 9, 0};
  const int widths[3] = {11, 11, 9};
  for (int pass = 0; pass < 3; ++pass) {
    const int bins = 1 << widths[pass];
    if ((e = cudaMemset(d_hist.get(), 0, bins * sizeof(unsigned long long))) != cudaSuccess) return Failed("clear histogram", e);
    DigitHistogramKernel<<<grid, 256>>>(d_v.get(), n, shifts[pass], widths[pass], prefix, d_hist.get(), d_bad.get());
    if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch histogram", e);
    if (pass == 0) {
      unsigned long long bad = 0;
      if ((e = cudaMemcpy(&bad, d_bad.get(), sizeof bad, cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy counter", e);
      *nonfinite = static_cast<std::int64_t>(bad);
      if (bad != 0) {
        if (residual != nullptr) cudaMemcpy(residual, d_v.get(), n * sizeof(float), cudaMemcpyDeviceToHost);
        return {};
      }
    }
    std::vector<unsigned long long> hist(static_cast<std::size_t>(bins));
    if ((e = cudaMemcpy(hist.data(), d_hist.get(), bins * sizeof(unsigned long long), cudaMemcpyDeviceToHost)) != cudaSuccess) {
      return Failed("copy histogram", e);
    }
    int digit = bins - 1;
    for (; digit > 0; --digit) {
      if (above + static_cast<std::int64_t>(hist[static_cast<std::size_t>(digit)]) >= k) break;
      above += static_cast<std::int64_t>(hist[static_cast<std::size_t>(digit)]);
    }
    prefix = (prefix << widths[pass]) | static_cast<std::uint32_t>(digit);
  }
  const Rule rule{prefix, k - above};

  // Index-order compaction: equal keys ranked across tiles, then selected values placed.
  std::vector<int> counts(static_cast<std::size_t>(tiles));
  CountEqualKernel<<<static_cast<unsigned>(tiles), kTile>>>(d_v.get(), n, rule, d_counts.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch equal-key count", e);
  if ((e = cudaMemcpy(counts.data(), d_counts.get(), tiles * sizeof(int), cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy counts", e);
  std::vector<std::int64_t> offsets = ExclusiveSum(counts);
  if ((e = cudaMemcpy(d_equal_offsets.get(), offsets.data(), tiles * sizeof(std::int64_t), cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("copy offsets", e);
  CountSelectedKernel<<<static_cast<unsigned>(tiles), kTile>>>(d_v.get(), n, rule, d_equal_offsets.get(), d_counts.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch selection count", e);
  if ((e = cudaMemcpy(counts.data(), d_counts.get(), tiles * sizeof(int), cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy counts", e);
  offsets = ExclusiveSum(counts);
  if (offsets.back() + counts.back() != k) return "top-k selection did not select k values";
  if ((e = cudaMemcpy(d_selected_offsets.get(), offsets.data(), tiles * sizeof(std::int64_t), cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("copy offsets", e);
  ScatterKernel<<<static_cast<unsigned>(tiles), kTile>>>(d_v.get(), n, rule, d_equal_offsets.get(), d_selected_offsets.get(),
                                                         residual != nullptr, d_indices.get(), d_values.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch scatter", e);
  if ((e = cudaMemcpy(indices, d_indices.get(), k * sizeof(std::uint32_t), cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy indices", e);
  if ((e = cudaMemcpy(values, d_values.get(), k * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy values", e);
  if (residual != nullptr) {
    if ((e = cudaMemcpy(residual, d_v.get(), n * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy residual", e);
  }
  return {};
}

}  // namespace testbed::topk
