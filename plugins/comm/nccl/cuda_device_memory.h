// Device memory of one GPU for host-staged endpoints (testbed/host_staging.h): cudaMalloc and
// synchronous cudaMemcpy with the GPU made current on the calling thread first, since the
// staging calls come from whichever thread drives the endpoint.
#pragma once

#include "testbed/host_staging.h"

namespace testbed::nccl {

class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) noexcept : device_(device) {}

  [[nodiscard]] absl::StatusOr<void*> Allocate(std::size_t bytes) override;
  void Release(void* block) noexcept override;
  [[nodiscard]] absl::Status ToDevice(void* device_dst, const void* host_src, std::size_t bytes) override;
  [[nodiscard]] absl::Status ToHost(void* host_dst, const void* device_src, std::size_t bytes) override;

 private:
  int device_;
};

}  // namespace testbed::nccl
