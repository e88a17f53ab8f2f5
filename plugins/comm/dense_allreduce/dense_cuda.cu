#include "dense_cuda.h"

#include <cuda_runtime.h>

#include "testbed/cuda/device_buffer.h"

#include <algorithm>

namespace testbed::dense {
namespace {

using cuda::DeviceBuffer;
using cuda::Failed;

int Grid(std::int64_t n) { return static_cast<int>(std::min<std::int64_t>((n + 255) / 256, 4096)); }

__global__ void CountNonFiniteKernel(const float* v, std::int64_t n, unsigned long long* bad) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    local += !isfinite(v[i]);
  }
  if (local != 0) atomicAdd(bad, local);
}

__global__ void DivideKernel(const float* in, std::int64_t n, float divisor, float* out) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = in[i] / divisor;
  }
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

std::string CopyCheckedCuda(const float* gradient, std::int64_t n, float* values, std::int64_t* nonfinite) {
  DeviceBuffer<float> d_v;
  DeviceBuffer<unsigned long long> d_bad;
  cudaError_t e;
  if ((e = d_v.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc values", e);
  if ((e = d_bad.Allocate(1)) != cudaSuccess) return Failed("cudaMalloc counter", e);
  if ((e = cudaMemcpy(d_v.get(), gradient, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("copy gradient", e);
  if ((e = cudaMemset(d_bad.get(), 0, sizeof(unsigned long long))) != cudaSuccess) return Failed("clear counter", e);
  CountNonFiniteKernel<<<Grid(n), 256>>>(d_v.get(), n, d_bad.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch check", e);
  unsigned long long bad = 0;
  if ((e = cudaMemcpy(&bad, d_bad.get(), sizeof bad, cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy counter", e);
  if ((e = cudaMemcpy(values, d_v.get(), n * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy values", e);
  *nonfinite = static_cast<std::int64_t>(bad);
  return {};
}

std::string DivideCuda(const float* summed, std::int64_t n, int divisor, float* out) {
  DeviceBuffer<float> d_in, d_out;
  cudaError_t e;
  if ((e = d_in.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc input", e);
  if ((e = d_out.Allocate(n)) != cudaSuccess) return Failed("cudaMalloc output", e);
  if ((e = cudaMemcpy(d_in.get(), summed, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess) return Failed("copy input", e);
  DivideKernel<<<Grid(n), 256>>>(d_in.get(), n, static_cast<float>(divisor), d_out.get());
  if ((e = cudaGetLastError()) != cudaSuccess) return Failed("launch divide", e);
  if ((e = cudaMemcpy(out, d_out.get(), n * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) return Failed("copy output", e);
  return {};
}

}  // namespace testbed::dense
