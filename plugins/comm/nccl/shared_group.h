// What the endpoints of one nccl group share inside the process: the arrival board, the
// members' world ranks, and the table where sub-groups meet to agree on an NCCL unique id
// before each member creates its communicator with ncclCommInitRank.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nccl.h>

#include "absl/status/statusor.h"
#include "arrival_board.h"

namespace testbed::nccl {

using Clock = std::chrono::steady_clock;

struct SharedGroup {
  SharedGroup(std::vector<int> world_ranks_in, std::vector<int> devices_in);

  const std::vector<int> world_ranks;
  const std::vector<int> devices;  // CUDA device of each member
  const std::string name;          // "{0, 1}"
  ArrivalBoard board;

  // A sub-group being formed: its shared state and the unique id its communicator uses.
  struct Forming {
    std::shared_ptr<SharedGroup> group;
    ncclUniqueId id{};
    std::vector<bool> joined;
    int count = 0;
  };
  // Waits until every member of `members` (ranks of this group) has called it for the same
  // (members, nth); DeadlineExceeded naming the absent ones otherwise.
  [[nodiscard]] absl::StatusOr<std::pair<std::shared_ptr<SharedGroup>, ncclUniqueId>> Join(
      int rank, const std::vector<int>& members, int nth, Clock::time_point deadline, double timeout_s);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<std::vector<int>, int>, std::shared_ptr<Forming>> forming_;
};

// "2 (world rank 5), 3 (world rank 7)".
[[nodiscard]] std::string DescribeRanks(const SharedGroup& group, const std::vector<int>& ranks);

}  // namespace testbed::nccl
