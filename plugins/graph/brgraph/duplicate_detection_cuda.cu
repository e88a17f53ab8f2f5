#include "duplicate_detection_cuda.h"

#include <cuda_runtime.h>

#include <cub/device/device_select.cuh>

#include "testbed/cuda/device_buffer.h"

namespace testbed::brgraph {
namespace {

using cuda::DeviceBuffer;
using cuda::Failed;

constexpr int kThreads = 256;

int Blocks(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

__global__ void MarkKernel(const std::int64_t* ids, std::int64_t n, std::uint8_t* mark) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    mark[ids[i]] = 1;
  }
}

__global__ void ClassifyKernel(const std::int64_t* batch, std::int64_t n, const std::uint8_t* mark, std::uint8_t* dup,
                               std::uint8_t* fresh) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint8_t m = mark[batch[i]];
    dup[i] = m;
    fresh[i] = static_cast<std::uint8_t>(1 - m);
  }
}

}  // namespace

bool CudaDeviceAvailable() noexcept {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string DetectDuplicatesCuda(std::int64_t vertices, const std::vector<std::int64_t>& resident,
                                 const std::vector<std::int64_t>& batch, std::vector<std::int64_t>& duplicates,
                                 std::vector<std::int64_t>& fresh) {
  const auto nr = static_cast<std::int64_t>(resident.size()), n = static_cast<std::int64_t>(batch.size());
  DeviceBuffer<std::uint8_t> mark, dup, fr;
  DeviceBuffer<std::int64_t> d_res, d_batch, d_dup, d_fresh;
  DeviceBuffer<std::int64_t> counts;  // selected per list
  if (auto e = mark.Allocate(vertices); e != cudaSuccess) return Failed("cudaMallocAsync(mark)", e);
  if (auto e = d_res.Allocate(nr); e != cudaSuccess) return Failed("cudaMallocAsync(resident)", e);
  if (auto e = d_batch.Allocate(n); e != cudaSuccess) return Failed("cudaMallocAsync(batch)", e);
  if (auto e = dup.Allocate(n); e != cudaSuccess) return Failed("cudaMallocAsync(flags)", e);
  if (auto e = fr.Allocate(n); e != cudaSuccess) return Failed("cudaMallocAsync(flags)", e);
  if (auto e = d_dup.Allocate(n); e != cudaSuccess) return Failed("cudaMallocAsync(duplicates)", e);
  if (auto e = d_fresh.Allocate(n); e != cudaSuccess) return Failed("cudaMallocAsync(fresh)", e);
  if (auto e = counts.Allocate(2); e != cudaSuccess) return Failed("cudaMallocAsync(counts)", e);
  if (auto e = cudaMemsetAsync(mark.get(), 0, static_cast<size_t>(vertices < 1 ? 1 : vertices), cudaStreamLegacy);
      e != cudaSuccess) {
    return Failed("cudaMemsetAsync", e);
  }
  if (nr > 0) {
    if (auto e = cudaMemcpy(d_res.get(), resident.data(), static_cast<size_t>(nr) * sizeof(std::int64_t),
                            cudaMemcpyHostToDevice);
        e != cudaSuccess) {
      return Failed("cudaMemcpy(resident)", e);
    }
    MarkKernel<<<Blocks(nr), kThreads>>>(d_res.get(), nr, mark.get());
  }
  duplicates.clear();
  fresh.clear();
  if (n == 0) {
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? "" : Failed("MarkKernel", e);
  }
  if (auto e = cudaMemcpy(d_batch.get(), batch.data(), static_cast<size_t>(n) * sizeof(std::int64_t),
                          cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return Failed("cudaMemcpy(batch)", e);
  }
  ClassifyKernel<<<Blocks(n), kThreads>>>(d_batch.get(), n, mark.get(), dup.get(), fr.get());
  if (auto e = cudaGetLastError(); e != cudaSuccess) return Failed("ClassifyKernel", e);
  // Stable compaction of each list (CUB keeps the input order).
  size_t temp_bytes = 0;
  if (auto e = cub::DeviceSelect::Flagged(nullptr, temp_bytes, d_batch.get(), dup.get(), d_dup.get(), counts.get(),
                                          static_cast<int>(n));
      e != cudaSuccess) {
    return Failed("cub::DeviceSelect::Flagged (size)", e);
  }
  DeviceBuffer<std::uint8_t> temp;
  if (auto e = temp.Allocate(static_cast<std::int64_t>(temp_bytes)); e != cudaSuccess) {
    return Failed("cudaMallocAsync(temp)", e);
  }
  for (int list = 0; list < 2; ++list) {
    size_t bytes = temp_bytes;
    const std::uint8_t* flags = list == 0 ? dup.get() : fr.get();
    std::int64_t* out = list == 0 ? d_dup.get() : d_fresh.get();
    if (auto e = cub::DeviceSelect::Flagged(temp.get(), bytes, d_batch.get(), flags, out, counts.get() + list,
                                            static_cast<int>(n));
        e != cudaSuccess) {
      return Failed("cub::DeviceSelect::Flagged", e);
    }
  }
  std::int64_t selected[2] = {0, 0};
  if (auto e = cudaMemcpy(selected, counts.get(), sizeof(selected), cudaMemcpyDeviceToHost); e != cudaSuccess) {
    return Failed("cudaMemcpy(counts)", e);
  }
  duplicates.resize(static_cast<size_t>(selected[0]));
  fresh.resize(static_cast<size_t>(selected[1]));
  if (selected[0] > 0) {
    if (auto e = cudaMemcpy(duplicates.data(), d_dup.get(), static_cast<size_t>(selected[0]) * sizeof(std::int64_t),
                            cudaMemcpyDeviceToHost);
        e != cudaSuccess) {
      return Failed("cudaMemcpy(duplicates)", e);
    }
  }
  if (selected[1] > 0) {
    if (auto e = cudaMemcpy(fresh.data(), d_fresh.get(), static_cast<size_t>(selected[1]) * sizeof(std::int64_t),
                            cudaMemcpyDeviceToHost);
        e != cudaSuccess) {
      return Failed("cudaMemcpy(fresh)", e);
    }
  }
  return "";
}

}  // namespace testbed::brgraph
