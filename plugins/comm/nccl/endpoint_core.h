// One rank's NCCL state, shared by its endpoint and the requests it started: the NCCL
// communicator, the CUDA stream its operations are queued on, and whether the group is
// broken (after a timeout the communicator is aborted and never used again).
#pragma once

#include <memory>
#include <mutex>

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "shared_group.h"

namespace testbed::nccl {

class EndpointCore {
 public:
  // Takes ownership of `comm` and creates the rank's stream on its device.
  EndpointCore(std::shared_ptr<SharedGroup> shared, int rank, ncclComm_t comm, double timeout_s);
  ~EndpointCore();
  EndpointCore(const EndpointCore&) = delete;
  EndpointCore& operator=(const EndpointCore&) = delete;

  [[nodiscard]] const SharedGroup& shared() const noexcept { return *shared_; }
  [[nodiscard]] std::shared_ptr<SharedGroup> shared_ptr() const noexcept { return shared_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return static_cast<int>(shared_->world_ranks.size()); }
  [[nodiscard]] int device() const noexcept { return shared_->devices[static_cast<size_t>(rank_)]; }
  [[nodiscard]] ncclComm_t comm() const noexcept { return comm_; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  [[nodiscard]] double timeout_s() const noexcept { return timeout_s_; }
  // A 4-byte device buffer for barriers.
  [[nodiscard]] int* scratch() const noexcept { return scratch_; }
  // Makes this rank's device current on the calling thread (CUDA's current device is per thread).
  [[nodiscard]] absl::Status UseDevice() const;

  // Marks the group broken and aborts the NCCL communicator (once), so that kernels waiting
  // for an absent peer are torn down.
  void Abort(const absl::Status& why);
  [[nodiscard]] absl::Status CheckUsable() const;

 private:
  std::shared_ptr<SharedGroup> shared_;
  int rank_;
  ncclComm_t comm_;
  cudaStream_t stream_ = nullptr;
  int* scratch_ = nullptr;
  double timeout_s_;
  mutable std::mutex mu_;
  absl::Status broken_;
  bool aborted_ = false;
};

}  // namespace testbed::nccl
