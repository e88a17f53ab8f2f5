// The `local` communicator: every rank is a thread of this process and data moves through
// shared memory, one copy from source to destination. For tests, for debugging a schedule
// on one machine, and as the reference the other communicators are compared against.
#pragma once

#include "testbed/communicator.h"

namespace testbed::local {

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(double timeout_s) : timeout_s_(timeout_s) {}

  // Returns world_size endpoints on a new world; endpoint r is rank r. Use each one from its
  // own thread (collectives block until every rank takes part).
  [[nodiscard]] absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> Connect(int world_size) override;
  [[nodiscard]] MemorySpace memory_space() const noexcept override { return MemorySpace::kHost; }

 private:
  double timeout_s_;
};

}  // namespace testbed::local
