// Double binary tree all-reduce (NCCL's tree algorithm): two complementary binary trees each
// reduce half of the buffer towards a root and broadcast it back, pipelined; log-depth
// latency instead of the ring's linear one, so it wins for small messages on many ranks.
// Other ops fall back to the ring.
#pragma once

#include "ring.h"

namespace testbed::collectives {

class Tree final : public TunedCollective {
 public:
  using TunedCollective::TunedCollective;
  [[nodiscard]] absl::StatusOr<CommPlan> PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                        std::int64_t bytes, const Cluster& cluster) const override;
};

[[nodiscard]] CommPlan TreePlan(CollectiveOp op, const std::vector<DeviceId>& group, double bytes,
                                const Cluster& cluster, const CommTuning& tuning);

}  // namespace testbed::collectives
