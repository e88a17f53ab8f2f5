#include "completion.h"

namespace testbed::local {

void Completion::Finish(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
  }
  cv_.notify_all();
}

bool Completion::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool Completion::WaitUntil(Clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [this] { return done_; });
}

void Completion::Wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
}

absl::Status Completion::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

}  // namespace testbed::local
