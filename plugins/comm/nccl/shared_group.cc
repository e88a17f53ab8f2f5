#include "shared_group.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed::nccl {

SharedGroup::SharedGroup(std::vector<int> world_ranks_in, std::vector<int> devices_in)
    : world_ranks(std::move(world_ranks_in)),
      devices(std::move(devices_in)),
      name(absl::StrCat("{", absl::StrJoin(world_ranks, ", "), "}")),
      board(static_cast<int>(world_ranks.size())) {}

std::string DescribeRanks(const SharedGroup& group, const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (int r : ranks) parts.push_back(absl::StrCat(r, " (world rank ", group.world_ranks[static_cast<size_t>(r)], ")"));
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<std::pair<std::shared_ptr<SharedGroup>, ncclUniqueId>> SharedGroup::Join(
    int rank, const std::vector<int>& members, int nth, Clock::time_point deadline, double timeout_s) {
  const int size = static_cast<int>(members.size());
  const auto index = static_cast<size_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  const auto key = std::make_pair(members, nth);
  std::unique_lock<std::mutex> lock(mu_);
  std::shared_ptr<Forming>& slot = forming_[key];
  if (!slot) {
    slot = std::make_shared<Forming>();
    std::vector<int> world, devs;
    for (int m : members) {
      world.push_back(world_ranks[static_cast<size_t>(m)]);
      devs.push_back(devices[static_cast<size_t>(m)]);
    }
    slot->group = std::make_shared<SharedGroup>(std::move(world), std::move(devs));
    if (ncclGetUniqueId(&slot->id) != ncclSuccess) {
      forming_.erase(key);
      return absl::UnavailableError("new_group: ncclGetUniqueId failed");
    }
    slot->joined.assign(static_cast<size_t>(size), false);
  }
  std::shared_ptr<Forming> forming = slot;
  forming->joined[index] = true;
  if (++forming->count == size) {
    forming_.erase(key);
    cv_.notify_all();
    return std::make_pair(forming->group, forming->id);
  }
  if (cv_.wait_until(lock, deadline, [&] { return forming->count == size; })) {
    return std::make_pair(forming->group, forming->id);
  }
  forming->joined[index] = false;
  if (--forming->count == 0) forming_.erase(key);
  std::vector<int> absent;
  for (int i = 0; i < size; ++i) {
    if (!forming->joined[static_cast<size_t>(i)] && static_cast<size_t>(i) != index) {
      absent.push_back(members[static_cast<size_t>(i)]);
    }
  }
  return absl::DeadlineExceededError(absl::StrCat("new_group of ranks {", absl::StrJoin(members, ", "), "}: rank(s) ",
                                                  absl::StrJoin(absent, ", "), " did not join within timeout_s = ",
                                                  timeout_s, " s"));
}

}  // namespace testbed::nccl
