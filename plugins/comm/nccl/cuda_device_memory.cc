#include "cuda_device_memory.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"

namespace testbed::nccl {
namespace {

[[nodiscard]] absl::Status Check(cudaError_t e, const char* what, int device) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " on GPU ", device, ": ", cudaGetErrorString(e)));
}

}  // namespace

absl::StatusOr<void*> CudaDeviceMemory::Allocate(std::size_t bytes) {
  if (absl::Status s = Check(cudaSetDevice(device_), "cudaSetDevice", device_); !s.ok()) return s;
  void* p = nullptr;
  if (const cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cudaMalloc of ", bytes, " bytes on GPU ", device_, ": ", cudaGetErrorString(e)));
  }
  return p;
}

void CudaDeviceMemory::Release(void* block) noexcept {
  if (cudaSetDevice(device_) == cudaSuccess) cudaFree(block);
}

absl::Status CudaDeviceMemory::ToDevice(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = Check(cudaSetDevice(device_), "cudaSetDevice", device_); !s.ok()) return s;
  return Check(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device", device_);
}

absl::Status CudaDeviceMemory::ToHost(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = Check(cudaSetDevice(device_), "cudaSetDevice", device_); !s.ok()) return s;
  return Check(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host", device_);
}

}  // namespace testbed::nccl
