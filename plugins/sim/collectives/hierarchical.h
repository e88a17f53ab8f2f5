// Hierarchical collectives for groups spanning nodes: all-reduce = reduce-scatter inside
// each node, all-reduce of each 1/k shard across nodes among the members with the same local
// position, then all-gather inside each node, so the slow inter-node links carry 1/k of
// the buffer. Needs the same number of members on every node; otherwise (or within one
// node) it is the ring. `Auto` picks, per call, the fastest of ring, tree and hierarchical
// on an idle cluster, like NCCL's tuner.
#pragma once

#include "link_loads.h"

namespace testbed::collectives {

[[nodiscard]] CommPlan HierarchicalPlan(CollectiveOp op, const std::vector<DeviceId>& group, double bytes,
                                        const Cluster& cluster, const CommTuning& tuning);

class Hierarchical final : public Collective {
 public:
  Hierarchical(CommTuning tuning, bool choose_fastest) : tuning_(tuning), choose_fastest_(choose_fastest) {}
  [[nodiscard]] absl::StatusOr<CommPlan> PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                        std::int64_t bytes, const Cluster& cluster) const override;
  [[nodiscard]] absl::StatusOr<CommPlan> PlanTransfer(DeviceId src, DeviceId dst, std::int64_t bytes,
                                                      const Cluster& cluster) const override;
  [[nodiscard]] absl::StatusOr<CommPlan> PlanAllToAllV(const std::vector<DeviceId>& group,
                                                       std::span<const std::int64_t> bytes,
                                                       const Cluster& cluster) const override;

 private:
  CommTuning tuning_;
  bool choose_fastest_;
};

}  // namespace testbed::collectives
