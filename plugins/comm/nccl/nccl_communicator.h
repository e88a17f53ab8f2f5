// The `nccl` communicator: one rank per GPU of this process, NCCL underneath. Buffers are
// device memory, or host memory staged through the GPU when `host_buffers` is set (what the
// executor needs: it trains on the CPU); each endpoint is driven from its own thread (as with
// `local`).
#pragma once

#include "testbed/communicator.h"

namespace testbed::nccl {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(double timeout_s, bool host_buffers) : timeout_s_(timeout_s), host_buffers_(host_buffers) {}

  // world_size GPUs (devices 0 .. world_size-1), rank r on device r. Unavailable when no GPU
  // answers (a machine without a driver included) or NCCL fails to start.
  [[nodiscard]] absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> Connect(int world_size) override;
  [[nodiscard]] MemorySpace memory_space() const noexcept override {
    return host_buffers_ ? MemorySpace::kHost : MemorySpace::kCuda;
  }

 private:
  double timeout_s_;
  bool host_buffers_;
};

}  // namespace testbed::nccl
