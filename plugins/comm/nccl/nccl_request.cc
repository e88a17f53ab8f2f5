#include "nccl_request.h"

#include <sched.h>

#include "absl/strings/str_cat.h"

namespace testbed::nccl {

NcclRequest::NcclRequest(std::shared_ptr<EndpointCore> core, OpLabel label, cudaEvent_t done)
    : core_(std::move(core)), label_(label), done_(done) {}

NcclRequest::~NcclRequest() {
  if (!finished_) (void)Wait();
  cudaEventDestroy(done_);
}

std::string NcclRequest::Describe() const {
  if (label_.peer >= 0) {
    return absl::StrCat(label_.name, label_.name == std::string("send") ? " to rank " : " from rank ",
                        DescribeRanks(core_->shared(), {label_.peer}), " on group ", core_->shared().name);
  }
  return absl::StrCat(label_.name, " #", label_.seq, " on group ", core_->shared().name);
}

void NcclRequest::Finish(absl::Status status) {
  finished_ = true;
  status_ = std::move(status);
}

absl::StatusOr<bool> NcclRequest::Poll() {
  // Once the group is aborted its kernels end early and their events complete: that is not
  // success. Nor may the aborted communicator be asked anything again.
  if (absl::Status usable = core_->CheckUsable(); !usable.ok()) {
    return absl::Status(usable.code(), absl::StrCat(Describe(), ": ", usable.message()));
  }
  const cudaError_t e = cudaEventQuery(done_);
  if (e == cudaSuccess) return true;
  if (e != cudaErrorNotReady) {
    return absl::InternalError(absl::StrCat(Describe(), ": ", cudaGetErrorString(e)));
  }
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(core_->comm(), &async);
  if (async != ncclSuccess && async != ncclInProgress) {
    return absl::InternalError(absl::StrCat(Describe(), ": ", ncclGetErrorString(async)));
  }
  return false;
}

absl::Status NcclRequest::Wait() {
  if (finished_) return status_;
  (void)core_->UseDevice();
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(core_->timeout_s()));
  int spins = 0;
  for (;;) {
    auto done = Poll();
    if (!done.ok()) {
      core_->Abort(done.status());
      Finish(done.status());
      return status_;
    }
    if (*done) {
      Finish(absl::OkStatus());
      return status_;
    }
    if (Clock::now() >= deadline) break;
    if (++spins > 1000) sched_yield();
  }
  const std::string within = absl::StrCat(" within timeout_s = ", core_->timeout_s(), " s");
  absl::Status error;
  if (label_.peer >= 0) {
    error = absl::DeadlineExceededError(absl::StrCat(Describe(), ": rank ", DescribeRanks(core_->shared(), {label_.peer}),
                                                     " did not post the matching operation", within));
  } else {
    const std::vector<int> missing = core_->shared().board.Missing(label_.seq);
    error = absl::DeadlineExceededError(
        missing.empty() ? absl::StrCat(Describe(), ": every member started it but it did not finish", within)
                        : absl::StrCat(Describe(), ": rank(s) ", DescribeRanks(core_->shared(), missing),
                                       " did not join", within));
  }
  core_->Abort(error);
  Finish(error);
  return status_;
}

absl::StatusOr<bool> NcclRequest::Test() {
  if (finished_) {
    if (!status_.ok()) return status_;
    return true;
  }
  (void)core_->UseDevice();
  auto done = Poll();
  if (!done.ok()) {
    core_->Abort(done.status());
    Finish(done.status());
    return status_;
  }
  if (*done) Finish(absl::OkStatus());
  return *done;
}

}  // namespace testbed::nccl
