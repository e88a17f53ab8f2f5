#include "mpi_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "mpi_runtime.h"
#include "poll.h"

namespace testbed::mpi {

MpiRequest::MpiRequest(std::shared_ptr<GroupCore> core, OpLabel label, std::vector<MPI_Request> requests,
                       std::shared_ptr<void> buffers)
    : core_(std::move(core)), label_(label), requests_(std::move(requests)), buffers_(std::move(buffers)) {}

MpiRequest::~MpiRequest() {
  if (!finished_ && MpiUsable()) (void)Wait();
}

std::string MpiRequest::Describe() const {
  if (label_.peer >= 0) {
    return absl::StrCat(label_.name, label_.name == std::string("send") ? " to rank " : " from rank ",
                        core_->DescribeRanks({label_.peer}), ", tag ", label_.tag, ", on group ", core_->name());
  }
  return absl::StrCat(label_.name, " #", label_.seq, " on group ", core_->name());
}

void MpiRequest::Finish(absl::Status status) {
  finished_ = true;
  status_ = std::move(status);
  buffers_.reset();
}

absl::Status MpiRequest::Wait() {
  if (finished_) return status_;
  absl::Status polled = PollUntil(requests_, DeadlineAfter(core_->timeout_s()), &core_->arrivals());
  if (absl::IsDeadlineExceeded(polled)) {
    Finish(TimedOut());
  } else if (!polled.ok()) {
    Finish(absl::Status(polled.code(), absl::StrCat(Describe(), ": ", polled.message())));
  } else {
    Finish(absl::OkStatus());
  }
  return status_;
}

absl::StatusOr<bool> MpiRequest::Test() {
  if (finished_) {
    if (!status_.ok()) return status_;
    return true;
  }
  int done = 0;
  const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    Finish(absl::Status(absl::StatusCode::kInternal, absl::StrCat(Describe(), ": ", MpiError(rc, "MPI_Testall").message())));
    return status_;
  }
  if (!done) return false;
  Finish(absl::OkStatus());
  return true;
}

absl::Status MpiRequest::TimedOut() {
  const std::string within = absl::StrCat(" within timeout_s = ", core_->timeout_s(), " s");
  if (label_.peer >= 0) {
    // A send or receive that never matched can be withdrawn; then the group stays usable.
    for (MPI_Request& r : requests_) {
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    }
    std::vector<MPI_Status> statuses(requests_.size());
    const Clock::time_point until = DeadlineAfter(0.2);
    Backoff backoff;
    int done = 0;
    for (;;) {
      MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, statuses.data());
      if (done || Clock::now() >= until) break;
      backoff.Pause();
    }
    absl::Status error = absl::DeadlineExceededError(
        absl::StrCat(Describe(), ": rank ", core_->DescribeRanks({label_.peer}), " did not post the matching ",
                     label_.name == std::string("send") ? "receive" : "send", within));
    if (done) {
      bool cancelled = false;
      for (MPI_Status& st : statuses) {
        int c = 0;
        MPI_Test_cancelled(&st, &c);
        cancelled = cancelled || c;
      }
      return cancelled ? error : absl::OkStatus();  // not cancelled: it matched at the last moment
    }
    core_->Break(error);
    core_->Adopt(std::move(requests_), std::move(buffers_));
    return error;
  }
  absl::Status error = core_->CollectiveTimedOut(Describe(), label_.seq);
  core_->Adopt(std::move(requests_), std::move(buffers_));
  return error;
}

}  // namespace testbed::mpi
