// Tells a timed-out rank which members never started a collective, and which started it and
// then fell silent. MPI cannot say who is missing, so each rank sends a tiny note "I started
// collective #s" to every other member on a separate communicator when it starts one; on a
// timeout the notes received so far name the absent ranks. A rank that has waited on an
// operation for a while also sends a pulse to every member every 50 ms, so that when every
// member started the operation, the one that died inside it (or stopped waiting) is the one
// no pulse comes from. Notes and pulses are drained as they come, so none pile up.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include <mpi.h>

namespace testbed::mpi {

class ArrivalTracker {
 public:
  // `control`: a communicator used only for these notes (and sub-group handshakes, on
  // another tag). `enabled` false sends nothing and reports no one as missing.
  ArrivalTracker(MPI_Comm control, int rank, int size, bool enabled);
  ArrivalTracker(const ArrivalTracker&) = delete;
  ArrivalTracker& operator=(const ArrivalTracker&) = delete;

  // This rank has started collective `seq`.
  void Announce(std::int64_t seq);
  // Members (other than this rank) with no note for `seq`, after waiting up to `grace_s` for
  // notes still on their way.
  [[nodiscard]] std::vector<int> Missing(std::int64_t seq, double grace_s);
  // Sends a pulse to every other member if the last one went out 50 ms ago or more.
  void Pulse();
  // Members (other than this rank) nothing has come from (note or pulse) while this rank
  // listened for `quiet_s`, pulsing itself meanwhile so that a peer listening at the same
  // moment hears it.
  [[nodiscard]] std::vector<int> Silent(double quiet_s);
  // Note sends that have not completed (to a rank that is gone, say).
  [[nodiscard]] bool HasPendingSends();
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }

  static constexpr int kTag = 1;
  static constexpr int kPulseTag = 3;  // 2 is the sub-group handshake's

 private:
  void DrainLocked();
  void PulseLocked();

  struct Note {
    MPI_Request request = MPI_REQUEST_NULL;
    std::int64_t seq = 0;
  };

  MPI_Comm control_;
  int rank_;
  int size_;
  bool enabled_;
  std::mutex mu_;
  std::deque<std::unique_ptr<Note>> sending_;  // unique_ptr: MPI holds the address of seq
  std::vector<std::int64_t> last_seen_;
  std::vector<std::chrono::steady_clock::time_point> last_heard_;  // any note or pulse
  std::chrono::steady_clock::time_point last_pulse_{};
};

}  // namespace testbed::mpi
