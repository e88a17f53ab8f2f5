#include "rendezvous.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed::local {

Rendezvous::Rendezvous(std::vector<int> world_ranks, double timeout_s)
    : size_(static_cast<int>(world_ranks.size())),
      world_ranks_(std::move(world_ranks)),
      timeout_s_(timeout_s),
      group_name_(absl::StrCat("{", absl::StrJoin(world_ranks_, ", "), "}")) {}

std::string Rendezvous::Missing(const std::vector<bool>& present) const {
  std::vector<std::string> names;
  for (int r = 0; r < size_; ++r) {
    if (!present[static_cast<size_t>(r)]) {
      names.push_back(absl::StrCat(r, " (world rank ", world_ranks_[static_cast<size_t>(r)], ")"));
    }
  }
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<std::vector<const CollectiveArgs*>> Rendezvous::Arrive(int rank, std::int64_t seq,
                                                                      const CollectiveArgs& args,
                                                                      const std::string& what,
                                                                      Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(what, " on group ", group_name_,
                                                      ": the group is broken by an earlier error: ", broken_.message()));
  }
  Slot& slot = slots_[seq & 1];
  if (slot.seq != seq) {
    slot.seq = seq;
    slot.arrived = 0;
    slot.args.assign(static_cast<size_t>(size_), nullptr);
    slot.departed.assign(static_cast<size_t>(size_), false);
    slot.departed_count = 0;
  }
  slot.args[static_cast<size_t>(rank)] = &args;
  if (++slot.arrived == size_) {
    cv_.notify_all();
    return slot.args;
  }
  const bool all = cv_.wait_until(lock, deadline, [&] { return slot.arrived == size_ || !broken_.ok(); });
  if (slot.arrived == size_) return slot.args;
  if (!all) {
    std::vector<bool> present(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) present[static_cast<size_t>(r)] = slot.args[static_cast<size_t>(r)] != nullptr;
    broken_ = absl::DeadlineExceededError(absl::StrCat(what, " on group ", group_name_, ": rank(s) ", Missing(present),
                                                       " did not join within timeout_s = ", timeout_s_, " s"));
    cv_.notify_all();
  }
  // Leave the slot as it is: nobody will use it again, and a late rank sees the broken group.
  return broken_;
}

absl::Status Rendezvous::Depart(int rank, std::int64_t seq, const std::string& what, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& slot = slots_[seq & 1];
  slot.departed[static_cast<size_t>(rank)] = true;
  if (++slot.departed_count == size_) {
    cv_.notify_all();
    return absl::OkStatus();
  }
  // Peers that arrived are working on shared buffers; they always finish, so this deadline
  // only guards against a bug.
  if (cv_.wait_until(lock, deadline, [&] { return slot.departed_count == size_; })) return absl::OkStatus();
  absl::Status error = absl::DeadlineExceededError(absl::StrCat(what, " on group ", group_name_, ": rank(s) ",
                                                                 Missing(slot.departed), " did not finish in time"));
  if (broken_.ok()) broken_ = error;
  cv_.notify_all();
  return error;
}

void Rendezvous::Break(absl::Status why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.ok()) broken_ = std::move(why);
  }
  cv_.notify_all();
}

absl::Status Rendezvous::CheckUsable() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("group ", group_name_, " is broken by an earlier error: ", broken_.message()));
}

}  // namespace testbed::local
