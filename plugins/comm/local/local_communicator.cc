#include "local_communicator.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "group_state.h"
#include "local_group.h"

namespace testbed::local {

absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> LocalCommunicator::Connect(int world_size) {
  // Each rank gets a progress thread per group; a few hundred is as far as this is meant to go.
  constexpr int kMaxRanks = 1024;
  if (world_size < 1 || world_size > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("local communicator: world_size ", world_size, " outside [1, ", kMaxRanks, "]"));
  }
  std::vector<int> ranks(static_cast<size_t>(world_size));
  std::iota(ranks.begin(), ranks.end(), 0);
  auto state = std::make_shared<GroupState>(std::move(ranks), timeout_s_);
  std::vector<std::unique_ptr<CommGroup>> endpoints;
  endpoints.reserve(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) endpoints.push_back(std::make_unique<LocalGroup>(state, r));
  return endpoints;
}

}  // namespace testbed::local
