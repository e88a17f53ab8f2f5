// Waiting on MPI requests with a deadline: MPI's own waits block forever, so the mpi
// communicator polls MPI_Testall (which also drives MPI's progress) until the requests
// finish or time runs out.
#pragma once

#include <chrono>
#include <vector>

#include <mpi.h>

#include "absl/status/status.h"

namespace testbed::mpi {

class ArrivalTracker;

using Clock = std::chrono::steady_clock;

[[nodiscard]] Clock::time_point DeadlineAfter(double seconds);

// OK when all of `requests` finished by `deadline`; DeadlineExceeded (with an empty message
// for the caller to replace) when not; an MPI error otherwise. Finished requests become
// MPI_REQUEST_NULL.
// With `pulse`, a wait longer than 100 ms pulses its peers (ArrivalTracker::Pulse) as it goes.
[[nodiscard]] absl::Status PollUntil(std::vector<MPI_Request>& requests, Clock::time_point deadline,
                                     ArrivalTracker* pulse = nullptr);

// Lets other processes on an oversubscribed machine run while a poll loop waits.
class Backoff {
 public:
  void Pause() noexcept;

 private:
  int spins_ = 0;
};

}  // namespace testbed::mpi
