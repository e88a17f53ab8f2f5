#include "poll.h"

#include <sched.h>

#include "arrival_tracker.h"
#include "mpi_runtime.h"

namespace testbed::mpi {

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void Backoff::Pause() noexcept {
  // Spin briefly (latency of small operations), then yield the core on every turn: with more
  // ranks than cores a spinning rank would starve the peer it waits for.
  if (++spins_ > 2000) sched_yield();
}

absl::Status PollUntil(std::vector<MPI_Request>& requests, Clock::time_point deadline, ArrivalTracker* pulse) {
  Backoff backoff;
  const Clock::time_point pulse_from = Clock::now() + std::chrono::milliseconds(100);
  for (;;) {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Testall");
    if (done) return absl::OkStatus();
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return absl::DeadlineExceededError("");
    if (pulse != nullptr && now >= pulse_from) pulse->Pulse();
    backoff.Pause();
  }
}

}  // namespace testbed::mpi
