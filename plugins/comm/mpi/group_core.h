// What an mpi endpoint and its requests share: the MPI communicators, the members' world
// ranks, the arrival notes, and the broken state with the requests that could not be
// finished (MPI cannot cancel a started collective, so those stay alive with their
// communicator).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <mpi.h>

#include "absl/status/status.h"
#include "arrival_tracker.h"

namespace testbed::mpi {

// An operation the communicator drives itself (the ring all-reduce): it advances only when
// asked, so every wait on the group advances all of them, as MPI's progress engine does for its
// own non-blocking collectives; members may then wait for their operations in any order.
class Progressing {
 public:
  virtual ~Progressing() = default;
  virtual void Progress() = 0;
};

class GroupCore {
 public:
  // Takes ownership of `comm` and `control` (both duplicates made for this group): `comm`
  // carries the collectives and the users' messages, `control` the arrival notes, the
  // sub-group handshakes and the ring all-reduce's messages, each on its own tags.
  GroupCore(MPI_Comm comm, MPI_Comm control, std::vector<int> world_ranks, double timeout_s, bool track_arrivals);
  // Frees the communicators, unless an unfinished operation still uses them.
  ~GroupCore();
  GroupCore(const GroupCore&) = delete;
  GroupCore& operator=(const GroupCore&) = delete;

  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }
  [[nodiscard]] MPI_Comm control() const noexcept { return control_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return static_cast<int>(world_ranks_.size()); }
  [[nodiscard]] const std::vector<int>& world_ranks() const noexcept { return world_ranks_; }
  [[nodiscard]] double timeout_s() const noexcept { return timeout_s_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] ArrivalTracker& arrivals() noexcept { return arrivals_; }

  // "2 (world rank 5), 3 (world rank 7)".
  [[nodiscard]] std::string DescribeRanks(const std::vector<int>& ranks) const;

  // Marks the group unusable (the first reason wins).
  void Break(const absl::Status& why);
  // OK, or FailedPrecondition repeating what broke the group.
  [[nodiscard]] absl::Status CheckUsable() const;
  // After collective `seq` (described by `what`, e.g. "all_reduce #3 on group {0, 1}") missed
  // its deadline: names the members that never started it (from the arrival notes), breaks
  // the group with that error and returns it.
  [[nodiscard]] absl::Status CollectiveTimedOut(const std::string& what, std::int64_t seq);
  // The group's self-driven operations in flight (registered while unfinished).
  void Register(Progressing* op);
  void Unregister(Progressing* op);
  // Advances every registered operation but `except` (the caller's own).
  void ProgressOthers(const Progressing* except);
  // Keeps an unfinished operation (its requests and the buffers MPI may still use) alive.
  void Adopt(std::vector<MPI_Request> requests, std::shared_ptr<void> buffers);

 private:
  MPI_Comm comm_;
  MPI_Comm control_;
  int rank_ = 0;
  std::vector<int> world_ranks_;
  double timeout_s_;
  std::string name_;
  ArrivalTracker arrivals_;
  mutable std::mutex mu_;
  absl::Status broken_;
  std::vector<std::pair<std::vector<MPI_Request>, std::shared_ptr<void>>> orphans_;
  std::mutex progressing_mu_;
  std::vector<Progressing*> progressing_;
};

}  // namespace testbed::mpi
