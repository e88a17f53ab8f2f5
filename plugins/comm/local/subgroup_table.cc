#include "subgroup_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "group_state.h"

namespace testbed::local {

absl::StatusOr<std::shared_ptr<GroupState>> SubgroupTable::Join(int rank, const std::vector<int>& members, int nth,
                                                                const std::vector<int>& parent_world_ranks,
                                                                double timeout_s, Clock::time_point deadline) {
  const int size = static_cast<int>(members.size());
  const auto index = static_cast<size_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  const Key key{members, nth};
  std::unique_lock<std::mutex> lock(mu_);
  std::shared_ptr<Pending>& slot = pending_[key];
  if (!slot) {
    slot = std::make_shared<Pending>();
    std::vector<int> world;
    for (int m : members) world.push_back(parent_world_ranks[static_cast<size_t>(m)]);
    slot->state = std::make_shared<GroupState>(std::move(world), timeout_s);
    slot->joined.assign(static_cast<size_t>(size), false);
  }
  std::shared_ptr<Pending> pending = slot;
  pending->joined[index] = true;
  if (++pending->count == size) {
    pending_.erase(key);
    cv_.notify_all();
    return pending->state;
  }
  if (cv_.wait_until(lock, deadline, [&] { return pending->count == size; })) return pending->state;
  // Withdraw, so that a member arriving later waits for a fresh quorum instead of joining a
  // group whose other members gave up.
  pending->joined[index] = false;
  if (--pending->count == 0) pending_.erase(key);
  std::vector<int> absent;
  for (int i = 0; i < size; ++i) {
    if (!pending->joined[static_cast<size_t>(i)] && i != static_cast<int>(index)) absent.push_back(members[static_cast<size_t>(i)]);
  }
  return absl::DeadlineExceededError(absl::StrCat("new_group of ranks {", absl::StrJoin(members, ", "),
                                                  "}: rank(s) ", absl::StrJoin(absent, ", "),
                                                  " did not join within timeout_s = ", timeout_s, " s"));
}

}  // namespace testbed::local
