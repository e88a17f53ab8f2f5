// Where the members of a new sub-group meet: the first to arrive creates the sub-group's
// shared state, the others find it under the same key (member list, and how many groups
// with that member list this rank has created before), and all wait until everyone came.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "completion.h"

namespace testbed::local {

struct GroupState;

class SubgroupTable {
 public:
  // `members`: ranks of the parent group; `parent_world_ranks`: the parent's members' world
  // ranks. Returns the sub-group's state once every member joined; DeadlineExceeded naming
  // the absent members otherwise (this rank's join is then withdrawn).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<GroupState>> Join(int rank, const std::vector<int>& members, int nth,
                                                                 const std::vector<int>& parent_world_ranks,
                                                                 double timeout_s, Clock::time_point deadline);

 private:
  struct Pending {
    std::shared_ptr<GroupState> state;
    std::vector<bool> joined;
    int count = 0;
  };
  using Key = std::pair<std::vector<int>, int>;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::shared_ptr<Pending>> pending_;
};

}  // namespace testbed::local
