// CUDA twins of the CPU GELU, layer norm and softmax (see src/gelu.cc, layer_norm.cc,
// softmax.cc). Row kernels use one block per row and a shared-memory tree reduction.
#include <cuda_runtime.h>

#include "cuda_launch.h"

namespace testbed::train::cuda_detail {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__global__ void GeluForwardKernel(const float* x, float* y, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  y[i] = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kCubic * v * v * v)));
}

__global__ void GeluBackwardKernel(const float* x, const float* dy, float* dx, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float t = tanhf(kSqrt2OverPi * (v + kCubic * v * v * v));
  const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
  dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
}

// Sum (or max) of `value` over the block; every thread gets the result.
template <bool kMax>
__device__ float BlockReduce(float value, float* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float other = scratch[threadIdx.x + stride];
      scratch[threadIdx.x] = kMax ? fmaxf(scratch[threadIdx.x], other) : scratch[threadIdx.x] + other;
    }
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();
  return result;
}

__global__ void LayerNormKernel(const float* x, const float* gamma, const float* beta, float* y, std::int64_t cols,
                                float eps) {
  __shared__ float scratch[kThreads];
  const float* row = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  float* out = y + static_cast<std::int64_t>(blockIdx.x) * cols;
  float sum = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c];
  const float mean = BlockReduce<false>(sum, scratch) / static_cast<float>(cols);
  float sq = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) sq += (row[c] - mean) * (row[c] - mean);
  const float rstd = rsqrtf(BlockReduce<false>(sq, scratch) / static_cast<float>(cols) + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}

__global__ void SoftmaxKernel(const float* x, float* y, std::int64_t cols) {
  __shared__ float scratch[kThreads];
  const float* row = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  float* out = y + static_cast<std::int64_t>(blockIdx.x) * cols;
  float max = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) max = fmaxf(max, row[c]);
  max = BlockReduce<true>(max, scratch);
  float sum = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = expf(row[c] - max);
    out[c] = e;
    sum += e;
  }
  const float total = BlockReduce<false>(sum, scratch);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] /= total;
}

// Device copies of host arrays, freed on scope exit.
class DeviceArrays {
 public:
  ~DeviceArrays() {
    for (float* p : ptrs_) cudaFree(p);
  }
  // A device array of n floats, filled from `host` when given.
  cudaError_t Add(const float* host, std::int64_t n, float** out) {
    float* p = nullptr;
    cudaError_t e = cudaMalloc(&p, static_cast<size_t>(n > 0 ? n : 1) * sizeof(float));
    if (e != cudaSuccess) return e;
    ptrs_[count_++] = p;
    *out = p;
    if (host != nullptr && n > 0) e = cudaMemcpy(p, host, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice);
    return e;
  }

 private:
  float* ptrs_[5] = {};
  int count_ = 0;
};

int Finish(float* host, const float* device, std::int64_t n) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess && n > 0) e = cudaMemcpy(host, device, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost);
  return static_cast<int>(e);
}

unsigned Blocks(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

int DeviceCount() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a missing driver
    return -1;
  }
  return n;
}

const char* ErrorString(int code) noexcept { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

int GeluForward(const float* x, float* y, std::int64_t n) noexcept {
  DeviceArrays d;
  float *dx = nullptr, *dy = nullptr;
  cudaError_t e = d.Add(x, n, &dx);
  if (e == cudaSuccess) e = d.Add(nullptr, n, &dy);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (n > 0) GeluForwardKernel<<<Blocks(n), kThreads>>>(dx, dy, n);
  return Finish(y, dy, n);
}

int GeluBackward(const float* x, const float* dy, float* dx, std::int64_t n) noexcept {
  DeviceArrays d;
  float *gx = nullptr, *gdy = nullptr, *gdx = nullptr;
  cudaError_t e = d.Add(x, n, &gx);
  if (e == cudaSuccess) e = d.Add(dy, n, &gdy);
  if (e == cudaSuccess) e = d.Add(nullptr, n, &gdx);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (n > 0) GeluBackwardKernel<<<Blocks(n), kThreads>>>(gx, gdy, gdx, n);
  return Finish(dx, gdx, n);
}

int LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, std::int64_t rows,
                     std::int64_t cols, float eps) noexcept {
  DeviceArrays d;
  float *gx = nullptr, *gg = nullptr, *gb = nullptr, *gy = nullptr;
  cudaError_t e = d.Add(x, rows * cols, &gx);
  if (e == cudaSuccess) e = d.Add(gamma, cols, &gg);
  if (e == cudaSuccess) e = d.Add(beta, cols, &gb);
  if (e == cudaSuccess) e = d.Add(nullptr, rows * cols, &gy);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (rows > 0) LayerNormKernel<<<static_cast<unsigned>(rows), kThreads>>>(gx, gg, gb, gy, cols, eps);
  return Finish(y, gy, rows * cols);
}

int SoftmaxRows(const float* x, float* y, std::int64_t rows, std::int64_t cols) noexcept {
  DeviceArrays d;
  float *gx = nullptr, *gy = nullptr;
  cudaError_t e = d.Add(x, rows * cols, &gx);
  if (e == cudaSuccess) e = d.Add(nullptr, rows * cols, &gy);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (rows > 0) SoftmaxKernel<<<static_cast<unsigned>(rows), kThreads>>>(gx, gy, cols);
  return Finish(y, gy, rows * cols);
}

}  // namespace testbed::train::cuda_detail
