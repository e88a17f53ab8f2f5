// Hierarchical collectives for groups spanning nodes: all-reduce = reduce-scatter inside
// each node, all-reduce of each 1/k shard across nodes among the members with the same local
// position, then all-gather inside each node, so the slow inter-node links carry 1/k of
// the buffer. Needs the same number of members on every node; otherwise (or within one
// node) it is the ring. `Auto` picks, per call, the fastest of ring, tree and hierarchical
// on an idle cluster, like NCCL's tuner.
#pragma once

#include <optional>

#include "ring.h"

namespace testbed::collectives {

[[nodiscard]] CommPlan HierarchicalPlan(CollectiveOp op, const std::vector<DeviceId>& group, double bytes,
                                        const Cluster& cluster, const CommTuning& tuning);

// Heterogeneous collectives for groups spanning vendors (H2's clusters): inside each vendor's
// fabric first, then across vendors, so the cross-vendor links (host-staged or device-direct,
// Cluster::cross_vendor) carry 1/k of the buffer. Equal vendor counts k: all-reduce =
// reduce-scatter inside each vendor (hierarchical over its nodes), all-reduce of each 1/k
// shard across the vendors (ring j joins the j-th member of every vendor), all-gather inside;
// reduce-scatter and all-gather are the halves. Unequal counts, all-reduce only: each vendor
// reduces onto a leader, the leaders all-reduce the whole buffer, each leader broadcasts.
// nullopt where it does not apply (one vendor, other ops).
[[nodiscard]] std::optional<CommPlan> VendorHierarchicalPlan(CollectiveOp op, const std::vector<DeviceId>& group,
                                                             double bytes, const Cluster& cluster,
                                                             const CommTuning& tuning);

// `vendor_hierarchical`: VendorHierarchicalPlan where it applies, else `hierarchical`.
class VendorHierarchical final : public TunedCollective {
 public:
  using TunedCollective::TunedCollective;
  [[nodiscard]] absl::StatusOr<CommPlan> PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                        std::int64_t bytes, const Cluster& cluster) const override;
};

class Hierarchical final : public TunedCollective {
 public:
  Hierarchical(CommTuning tuning, bool choose_fastest) : TunedCollective(tuning), choose_fastest_(choose_fastest) {}
  [[nodiscard]] absl::StatusOr<CommPlan> PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                        std::int64_t bytes, const Cluster& cluster) const override;

 private:
  bool choose_fastest_;
};

}  // namespace testbed::collectives
