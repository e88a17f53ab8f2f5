// Small helpers for CUDA sources of plugins (include only from .cu files): an owning device
// allocation and the message of a failed CUDA call. Plugins' kernels live next to their CPU
// twins; these keep the host-side plumbing of every kernel file the same.
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
  [[nodiscard]] T* get() const noexcept { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

// "what: <CUDA's description of e>".
[[nodiscard]] inline std::string Failed(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace testbed::cuda
