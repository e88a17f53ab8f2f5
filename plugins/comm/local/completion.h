// A one-shot "operation finished" flag with its status, shared between the thread that
// finishes an operation (a rank's progress worker, or the peer that completes a transfer)
// and the thread that waits for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/status/status.h"

namespace testbed::local {

using Clock = std::chrono::steady_clock;

class Completion {
 public:
  // The first call wins; later calls are ignored.
  void Finish(absl::Status status);
  [[nodiscard]] bool done() const;
  // True once finished, false when `deadline` passed first.
  [[nodiscard]] bool WaitUntil(Clock::time_point deadline) const;
  void Wait() const;
  // The status given to Finish; OK before that.
  [[nodiscard]] absl::Status status() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
};

}  // namespace testbed::local
