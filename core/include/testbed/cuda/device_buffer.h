// Small helpers for CUDA sources (plugins' .cu files, the training engine's cuBLAS products):
// an owning device allocation and the message of a failed CUDA call. Plugins' kernels live
// next to their CPU twins; these keep the host-side plumbing of every kernel file the same.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace testbed::cuda {

// Device memory for `count` elements of T, freed with the object. Allocate(0) allocates one
// element, so that the pointer is valid for kernels that are given an empty range.
//
// Allocation and release are stream-ordered on the legacy default stream (cudaMallocAsync,
// cudaFreeAsync), where these buffers' kernels, synchronous copies and cuBLAS calls run:
// cudaFree would wait for the whole device, and a device running an NCCL kernel that waits
// for another rank (which may itself wait for this thread) would never get there. NCCL's own
// streams are non-blocking, so work on the default stream does not wait for them either.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Release(); }
  [[nodiscard]] cudaError_t Allocate(std::int64_t count) {
    Release();
    cudaGetDevice(&device_);
    return cudaMallocAsync(reinterpret_cast<void**>(&ptr_),
                           static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T), cudaStreamLegacy);
  }
  // Room for at least `count` elements, keeping the allocation when it is large enough (the
  // contents are not kept when it grows): one buffer reused by calls of varying sizes.
  [[nodiscard]] cudaError_t Reserve(std::int64_t count) {
    if (ptr_ != nullptr && count <= capacity_) return cudaSuccess;
    capacity_ = 0;
    const cudaError_t e = Allocate(count);
    if (e == cudaSuccess) capacity_ = std::max<std::int64_t>(count, 1);
    return e;
  }
  [[nodiscard]] T* get() const noexcept { return ptr_; }

 private:
  void Release() noexcept {
    if (ptr_ == nullptr) return;
    int current = device_;
    cudaGetDevice(&current);
    if (current != device_) cudaSetDevice(device_);
    cudaFreeAsync(ptr_, cudaStreamLegacy);
    if (current != device_) cudaSetDevice(current);
    ptr_ = nullptr;
  }

  T* ptr_ = nullptr;
  std::int64_t capacity_ = 0;  // elements, when reserved
  int device_ = 0;             // where ptr_ lives
};

// "what: <CUDA's description of e>".
[[nodiscard]] inline std::string Failed(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace testbed::cuda
