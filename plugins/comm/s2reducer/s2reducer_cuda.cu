#include "s2reducer_cuda.h"

#include <cuda_runtime.h>

#include "testbed/cuda/device_buffer.h"

#include <algorithm>

#include "sketch_median.h"

namespace testbed::s2reducer {
namespace {

using cuda::DeviceBuffer;
using cuda::Failed;

struct RowSeedArray {
  std::uint64_t s[kMaxRows];
};

// Owns one device allocation; frees it on every return path.
RowSeedArray Seeds(const SketchShape& shape) {
  RowSeedArray a{};
  for (int r = 0; r < shape.rows; ++r) a.s[r] = RowSeed(shape.seed, r);
  return a;
}

int BlocksFor(std::int64_t threads, int block) {
  return static_cast<int>(std::min<std::int64_t>((threads + block - 1) / block, 8192));
}

__device__ void Insert(float v, std::int64_t i, const RowSeedArray& seeds, int rows, std::uint32_t columns,
                       float* sketch, unsigned long long* nonfinite) {
  if (v == 0.0f) return;
  if (!isfinite(v)) atomicAdd(nonfinite, 1ull);
  for (int r = 0; r < rows; ++r) {
    const Slot s = Locate(seeds.s[r], static_cast<std::uint64_t>(i), columns);
    atomicAdd(&sketch[static_cast<std::int64_t>(r) * columns + s.column], s.sign * v);
  }
}

// One warp per bitmap word: two coalesced loads of 32 values, two ballots make the word, then
// each lane inserts its own non-zero values. The loop bound depends on the warp only, so the
// full-mask ballots are safe.
__global__ void EncodeKernel(const float* g, std::int64_t n, std::int64_t words, RowSeedArray seeds, int rows,
                             std::uint32_t columns, std::uint64_t* bitmap, float* sketch,
                             unsigned long long* counts) {
  const int lane = threadIdx.x & 31;
  const std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const std::int64_t stride = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (std::int64_t w = first; w < words; w += stride) {
    const std::int64_t i0 = 64 * w + lane;
    const std::int64_t i1 = i0 + 32;
    const float v0 = i0 < n ? g[i0] : 0.0f;
    const float v1 = i1 < n ? g[i1] : 0.0f;
    const unsigned lo = __ballot_sync(0xffffffffu, v0 != 0.0f);
    const unsigned hi = __ballot_sync(0xffffffffu, v1 != 0.0f);
    if (lane == 0) {
      bitmap[w] = (static_cast<std::uint64_t>(hi) << 32) | lo;
      atomicAdd(&counts[0], static_cast<unsigned long long>(__popc(lo) + __popc(hi)));
    }
    Insert(v0, i0, seeds, rows, columns, sketch, &counts[1]);
    Insert(v1, i1, seeds, rows, columns, sketch, &counts[1]);
  }
}

__global__ void DecodeKernel(std::int64_t n, RowSeedArray seeds, int rows, std::uint32_t columns,
                             const std::uint64_t* bitmap, const float* sketch, float divisor, float* out) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (((bitmap[i >> 6] >> (i & 63)) & 1ull) == 0) {
      out[i] = 0.0f;
      continue;
    }
    float v[kMaxRows];
    for (int r = 0; r < rows; ++r) {
      const Slot s = Locate(seeds.s[r], static_cast<std::uint64_t>(i), columns);
      v[r] = s.sign * sketch[static_cast<std::int64_t>(r) * columns + s.column];
    }
    out[i] = MedianInPlace(v, rows) / divisor;
  }
}

}  // namespace

bool CudaDeviceAvailable() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls see a clean state
    return false;
  }
  return count > 0;
}

std::string EncodeSketchCuda(const SketchShape& shape, const float* gradient, std::uint64_t* bitmap, float* sketch,
                             std::int64_t* nonzeros, std::int64_t* nonfinite) {
  const std::int64_t n = shape.elements;
  const std::int64_t words = shape.bitmap_words();
  DeviceBuffer<float> d_g, d_sketch;
  DeviceBuffer<std::uint64_t> d_bitmap;
  DeviceBuffer<unsigned long long> d_counts;
  cudaError_t e;
  if ((e = d_g.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc gradient", e);
  if ((e = d_sketch.Allocate(shape.counters())) != cudaSuccess) return Failed("cudaMalloc sketch", e);
  if ((e = d_bitmap.Allocate(words)) != cudaSuccess) return Failed("cudaMalloc bitmap", e);
  if ((e = d_counts.Allocate(2)) != cudaSuccess) return Failed("cudaMalloc counts", e);
  if ((e = cudaMemcpy(d_g.get(), gradient, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) {
    return Failed("copy gradient", e);
  }
  if ((e = cudaMemset(d_sketch.get(), 0, shape.counters() * sizeof(float))) != cudaSuccess) return Failed("clear sketch", e);
  if ((e = cudaMemset(d_counts.get(), 0, 2 * sizeof(unsigned long long))) != cudaSuccess) return Failed("clear counts", e);
  constexpr int kBlock = 256;
  EncodeKernel<<<BlocksFor(words * 32, kBlock), kBlock>>>(d_g.get(), n, words, Seeds(shape), shape.rows,
                                                          static_cast<std::uint32_t>(shape.columns), d_bitmap.get(),
                                                          d_sketch.get(), d_counts.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch encode", e);
  if ((e = cudaMemcpy(bitmap, d_bitmap.get(), words * sizeof(std::uint64_t), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return Failed("copy bitmap", e);
  }
  if ((e = cudaMemcpy(sketch, d_sketch.get(), shape.counters() * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return Failed("copy sketch", e);
  }
  unsigned long long counts[2] = {0, 0};
  if ((e = cudaMemcpy(counts, d_counts.get(), sizeof(counts), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return Failed("copy counts", e);
  }
  *nonzeros = static_cast<std::int64_t>(counts[0]);
  *nonfinite = static_cast<std::int64_t>(counts[1]);
  return {};
}

std::string DecodeSketchCuda(const SketchShape& shape, const std::uint64_t* bitmap, const float* sketch, int divisor,
                             float* out) {
  const std::int64_t n = shape.elements;
  const std::int64_t words = shape.bitmap_words();
  DeviceBuffer<float> d_sketch, d_out;
  DeviceBuffer<std::uint64_t> d_bitmap;
  cudaError_t e;
  if ((e = d_sketch.Allocate(shape.counters())) != cudaSuccess) return Failed("cudaMalloc sketch", e);
  if ((e = d_bitmap.Allocate(words)) != cudaSuccess) return Failed("cudaMalloc bitmap", e);
  if ((e = d_out.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc output", e);
  if ((e = cudaMemcpy(d_sketch.get(), sketch, shape.counters() * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) {
    return Failed("copy sketch", e);
  }
  if ((e = cudaMemcpy(d_bitmap.get(), bitmap, words * sizeof(std::uint64_t), cudaMemcpyHostToDevice)) != cudaSuccess) {
    return Failed("copy bitmap", e);
  }
  constexpr int kBlock = 256;
  DecodeKernel<<<BlocksFor(n, kBlock), kBlock>>>(n, Seeds(shape), shape.rows, static_cast<std::uint32_t>(shape.columns),
                                                 d_bitmap.get(), d_sketch.get(), static_cast<float>(divisor),
                                                 d_out.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch decode", e);
  if ((e = cudaMemcpy(out, d_out.get(), n * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return Failed("copy output", e);
  }
  return {};
}

}  // namespace testbed::s2reducer
