// Meeting point of a group's ranks for their collectives, numbered 0, 1, 2, ... in the order
// each rank issues them. Ranks publish their arguments, wait for everyone (with a deadline,
// so a missing rank is named instead of hanging the others), then do their share of the
// work directly on each other's buffers and wait again before touching their own.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collective_args.h"
#include "completion.h"

namespace testbed::local {

class Rendezvous {
 public:
  // `world_ranks`: the members' world ranks, for messages; `timeout_s`: likewise.
  Rendezvous(std::vector<int> world_ranks, double timeout_s);

  // Publishes `args` of `rank` for collective `seq` and waits until every member has.
  // Returns every member's arguments by rank (valid until Depart returns). When `deadline`
  // passes first: DeadlineExceeded naming `what` and the ranks that did not come, and the
  // group is broken. On a broken group: the error that broke it.
  [[nodiscard]] absl::StatusOr<std::vector<const CollectiveArgs*>> Arrive(int rank, std::int64_t seq,
                                                                         const CollectiveArgs& args,
                                                                         const std::string& what,
                                                                         Clock::time_point deadline);
  // Waits until every member has finished its share of collective `seq`, so that nobody
  // reads or writes this rank's buffers after it returns.
  [[nodiscard]] absl::Status Depart(int rank, std::int64_t seq, const std::string& what, Clock::time_point deadline);

  // Marks the group unusable with `why` (the first reason wins) and wakes every waiter.
  void Break(absl::Status why);
  // OK, or FailedPrecondition repeating what broke the group.
  [[nodiscard]] absl::Status CheckUsable() const;

  // "{0, 1, 2, 3}": the world ranks of the members.
  [[nodiscard]] const std::string& group_name() const noexcept { return group_name_; }

 private:
  // Two slots suffice: a rank reaches collective s + 2 only after every rank has left s
  // (collective s + 1 needed all of them, and each leaves s before starting s + 1).
  struct Slot {
    std::int64_t seq = -1;
    int arrived = 0;
    std::vector<const CollectiveArgs*> args;
    std::vector<bool> departed;
    int departed_count = 0;
  };

  [[nodiscard]] std::string Missing(const std::vector<bool>& present) const;

  const int size_;
  const std::vector<int> world_ranks_;
  const double timeout_s_;
  const std::string group_name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Slot slots_[2];
  absl::Status broken_;
};

}  // namespace testbed::local
