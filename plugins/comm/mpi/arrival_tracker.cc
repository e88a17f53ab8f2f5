#include "arrival_tracker.h"

#include "poll.h"

namespace testbed::mpi {

ArrivalTracker::ArrivalTracker(MPI_Comm control, int rank, int size, bool enabled)
    : control_(control),
      rank_(rank),
      size_(size),
      enabled_(enabled),
      last_seen_(static_cast<size_t>(size), -1),
      last_heard_(static_cast<size_t>(size), Clock::now()) {}

void ArrivalTracker::Announce(std::int64_t seq) {
  if (!enabled_ || size_ == 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto note = std::make_unique<Note>();
    note->seq = seq;
    MPI_Isend(&note->seq, 1, MPI_INT64_T, peer, kTag, control_, &note->request);
    sending_.push_back(std::move(note));
  }
}

void ArrivalTracker::DrainLocked() {
  // Completed sends, oldest first.
  while (!sending_.empty()) {
    int done = 0;
    MPI_Test(&sending_.front()->request, &done, MPI_STATUS_IGNORE);
    if (!done) break;
    sending_.pop_front();
  }
  // Notes and pulses that came in.
  for (const int tag : {kTag, kPulseTag}) {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, tag, control_, &flag, &status);
      if (!flag) break;
      std::int64_t seq = -1;
      MPI_Recv(&seq, 1, MPI_INT64_T, status.MPI_SOURCE, tag, control_, MPI_STATUS_IGNORE);
      const auto from = static_cast<size_t>(status.MPI_SOURCE);
      last_heard_[from] = Clock::now();
      if (tag == kTag && seq > last_seen_[from]) last_seen_[from] = seq;
    }
  }
}

void ArrivalTracker::PulseLocked() {
  const Clock::time_point now = Clock::now();
  if (now - last_pulse_ < std::chrono::milliseconds(50)) return;
  last_pulse_ = now;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto note = std::make_unique<Note>();
    note->seq = -1;
    MPI_Isend(&note->seq, 1, MPI_INT64_T, peer, kPulseTag, control_, &note->request);
    sending_.push_back(std::move(note));
  }
}

void ArrivalTracker::Pulse() {
  if (!enabled_ || size_ == 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
  PulseLocked();
}

std::vector<int> ArrivalTracker::Silent(double quiet_s) {
  std::vector<int> silent;
  if (!enabled_ || size_ == 1) return silent;
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point start = Clock::now(), until = DeadlineAfter(quiet_s);
  Backoff backoff;
  while (Clock::now() < until) {
    DrainLocked();
    PulseLocked();
    backoff.Pause();
  }
  DrainLocked();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && last_heard_[static_cast<size_t>(peer)] < start) silent.push_back(peer);
  }
  return silent;
}

std::vector<int> ArrivalTracker::Missing(std::int64_t seq, double grace_s) {
  std::vector<int> missing;
  if (!enabled_) return missing;
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point until = DeadlineAfter(grace_s);
  Backoff backoff;
  for (;;) {
    DrainLocked();
    missing.clear();
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_ && last_seen_[static_cast<size_t>(peer)] < seq) missing.push_back(peer);
    }
    if (missing.empty() || Clock::now() >= until) return missing;
    backoff.Pause();
  }
}

bool ArrivalTracker::HasPendingSends() {
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
  return !sending_.empty();
}

}  // namespace testbed::mpi
