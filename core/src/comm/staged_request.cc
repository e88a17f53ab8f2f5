#include "comm/staged_request.h"

#include "absl/strings/str_cat.h"

namespace testbed::comm {

absl::Status StagedRequest::Finish(absl::Status inner_status) {
  if (finished_) return status_;
  finished_ = true;
  status_ = std::move(inner_status);
  if (status_.ok() && copy_.bytes > 0) {
    if (absl::Status s = pool_->memory().ToHost(copy_.host, copy_.device, copy_.bytes); !s.ok()) {
      status_ = absl::InternalError(absl::StrCat(what_, ": copying the result to host memory: ", s.message()));
    }
  }
  return status_;
}

absl::Status StagedRequest::Wait() {
  if (finished_) return status_;
  return Finish(inner_->Wait());
}

absl::StatusOr<bool> StagedRequest::Test() {
  if (finished_) {
    if (!status_.ok()) return status_;
    return true;
  }
  absl::StatusOr<bool> done = inner_->Test();
  if (!done.ok()) {
    absl::Status s = Finish(done.status());
    return s;
  }
  if (!*done) return false;
  if (absl::Status s = Finish(absl::OkStatus()); !s.ok()) return s;
  return true;
}

}  // namespace testbed::comm
