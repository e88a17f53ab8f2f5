// The `nccl` communicator: one rank per GPU of this process, NCCL underneath. Buffers are
// device memory; each endpoint is driven from its own thread (as with `local`).
#pragma once

#include "testbed/communicator.h"

namespace testbed::nccl {

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(double timeout_s) : timeout_s_(timeout_s) {}

  // world_size GPUs (devices 0 .. world_size-1), rank r on device r. Unavailable when no GPU
  // answers (a machine without a driver included) or NCCL fails to start.
  [[nodiscard]] absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> Connect(int world_size) override;
  [[nodiscard]] MemorySpace memory_space() const noexcept override { return MemorySpace::kCuda; }

 private:
  double timeout_s_;
};

}  // namespace testbed::nccl
