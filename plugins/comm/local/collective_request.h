// The request of a local collective: the rank's progress worker finishes it.
#pragma once

#include <memory>

#include "completion.h"
#include "testbed/communicator.h"

namespace testbed::local {

class CollectiveRequest final : public CommRequest {
 public:
  explicit CollectiveRequest(std::shared_ptr<Completion> done) : done_(std::move(done)) {}
  // The worker finishes every job within its deadlines, so waiting here is bounded.
  ~CollectiveRequest() override { done_->Wait(); }

  [[nodiscard]] absl::Status Wait() override {
    done_->Wait();
    return done_->status();
  }
  [[nodiscard]] absl::StatusOr<bool> Test() override {
    if (!done_->done()) return false;
    absl::Status status = done_->status();
    if (!status.ok()) return status;
    return true;
  }

 private:
  std::shared_ptr<Completion> done_;
};

}  // namespace testbed::local
