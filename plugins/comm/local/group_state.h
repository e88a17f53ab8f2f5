// What the ranks of one group of the local communicator share: the collective meeting
// point, the point-to-point mailbox and the table where sub-groups are formed.
#pragma once

#include <memory>
#include <vector>

#include "mailbox.h"
#include "rendezvous.h"
#include "subgroup_table.h"

namespace testbed::local {

struct GroupState {
  GroupState(std::vector<int> world_ranks_in, double timeout_s_in)
      : world_ranks(std::move(world_ranks_in)), timeout_s(timeout_s_in), rendezvous(world_ranks, timeout_s) {}

  const std::vector<int> world_ranks;
  const double timeout_s;
  Rendezvous rendezvous;
  Mailbox mailbox;
  SubgroupTable subgroups;
};

}  // namespace testbed::local
