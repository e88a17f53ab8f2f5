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
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  [[nodiscard]] cudaError_t Allocate(std::int64_t count) {
    return cudaMalloc(reinterpret_cast<void**>(&ptr_),
                      static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T));
  }
  // Room for at least `count` elements, keeping the allocation when it is large enough (the
  // contents are not kept when it grows): one buffer reused by calls of varying sizes.
  [[nodiscard]] cudaError_t Reserve(std::int64_t count) {
    if (ptr_ != nullptr && count <= capacity_) return cudaSuccess;
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    const cudaError_t e = Allocate(count);
    if (e == cudaSuccess) capacity_ = std::max<std::int64_t>(count, 1);
    return e;
  }
  [[nodiscard]] T* get() const noexcept { return ptr_; }

 private:
  T* ptr_ = nullptr;
  std::int64_t capacity_ = 0;  // elements, when reserved
};

// "what: <CUDA's description of e>".
[[nodiscard]] inline std::string Failed(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace testbed::cuda
