#include "endpoint_core.h"

#include "absl/strings/str_cat.h"

namespace testbed::nccl {

EndpointCore::EndpointCore(std::shared_ptr<SharedGroup> shared, int rank, ncclComm_t comm, double timeout_s)
    : shared_(std::move(shared)), rank_(rank), comm_(comm), timeout_s_(timeout_s) {
  // A failure here leaves the group broken: every operation then fails with this reason.
  cudaError_t e = cudaSetDevice(device());
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(int));
  if (e != cudaSuccess) {
    broken_ = absl::InternalError(
        absl::StrCat("setting up rank ", rank_, " on GPU ", device(), ": ", cudaGetErrorString(e)));
  }
}

EndpointCore::~EndpointCore() {
  cudaSetDevice(device());
  bool aborted = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted = aborted_;
  }
  if (!aborted) {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status EndpointCore::UseDevice() const {
  const cudaError_t e = cudaSetDevice(device());
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cudaSetDevice(", device(), "): ", cudaGetErrorString(e)));
}

void EndpointCore::Abort(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.ok()) broken_ = why;
  if (!aborted_) {
    aborted_ = true;
    ncclCommAbort(comm_);
  }
}

absl::Status EndpointCore::CheckUsable() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("group ", shared_->name, " is broken by an earlier error: ", broken_.message()));
}

}  // namespace testbed::nccl
