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

CudaDeviceMemory::~CudaDeviceMemory() {
  if (copies_ != nullptr && cudaSetDevice(device_) == cudaSuccess) cudaStreamDestroy(copies_);
}

absl::Status CudaDeviceMemory::Ready() {
  if (absl::Status s = Check(cudaSetDevice(device_), "cudaSetDevice", device_); !s.ok()) return s;
  if (copies_ == nullptr) {
    return Check(cudaStreamCreateWithFlags(&copies_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", device_);
  }
  return absl::OkStatus();
}

absl::Status CudaDeviceMemory::Copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                                    const char* what) {
  if (bytes == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = Ready(); !s.ok()) return s;
  if (absl::Status s = Check(cudaMemcpyAsync(dst, src, bytes, kind, copies_), what, device_); !s.ok()) return s;
  return Check(cudaStreamSynchronize(copies_), what, device_);
}

absl::Status CudaDeviceMemory::ToDevice(void* device_dst, const void* host_src, std::size_t bytes) {
  return Copy(device_dst, host_src, bytes, cudaMemcpyHostToDevice, "copy to the device");
}

absl::Status CudaDeviceMemory::ToHost(void* host_dst, const void* device_src, std::size_t bytes) {
  return Copy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, "copy to the host");
}

}  // namespace testbed::nccl
