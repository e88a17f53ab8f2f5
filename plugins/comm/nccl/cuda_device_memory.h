// Device memory of one GPU for host-staged endpoints (testbed/host_staging.h): cudaMalloc, and
// copies on a stream of their own that each wait for before returning. Not cudaMemcpy on the
// default stream: from pageable memory it may return before the data has landed, and nothing
// would order that transfer before a collective queued on the rank's non-blocking stream.
// Waiting on the device instead could wait on a collective that waits for this very rank. The
// GPU is made current on the calling thread first: staging runs on whichever thread drives the
// endpoint.
#pragma once

#include <cuda_runtime.h>

#include <mutex>

#include "testbed/host_staging.h"

namespace testbed::nccl {

class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) noexcept : device_(device) {}
  CudaDeviceMemory(const CudaDeviceMemory&) = delete;
  CudaDeviceMemory& operator=(const CudaDeviceMemory&) = delete;
  ~CudaDeviceMemory() override;

  [[nodiscard]] absl::StatusOr<void*> Allocate(std::size_t bytes) override;
  void Release(void* block) noexcept override;
  [[nodiscard]] absl::Status ToDevice(void* device_dst, const void* host_src, std::size_t bytes) override;
  [[nodiscard]] absl::Status ToHost(void* host_dst, const void* device_src, std::size_t bytes) override;

 private:
  // Makes the GPU current and the copy stream exist.
  [[nodiscard]] absl::Status Ready();
  [[nodiscard]] absl::Status Copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const char* what);

  int device_;
  std::mutex mu_;  // copies may come from several threads of the rank (its sub-groups)
  cudaStream_t copies_ = nullptr;
};

}  // namespace testbed::nccl
