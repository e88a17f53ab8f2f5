#include "hierarchical.h"

#include <optional>

#include "ring.h"
#include "tree.h"

namespace testbed::collectives {

CommPlan HierarchicalPlan(CollectiveOp op, const std::vector<DeviceId>& group, double bytes, const Cluster& cluster,
                          const CommTuning& tuning) {
  const auto nodes = ByNode(group, cluster);
  const size_t k = nodes.front().size();
  bool uniform = nodes.size() > 1 && k > 1;
  for (const auto& members : nodes) uniform = uniform && members.size() == k;
  const bool supported = op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllGather ||
                         op == CollectiveOp::kReduceScatter;
  if (!uniform || !supported) return RingPlan(op, group, bytes, cluster, tuning);

  CommPlan plan;
  plan.algorithm = "hierarchical";
  auto merge = [&](const std::vector<CommPlan>& parallel) { MergeParallel(parallel, plan); };
  auto intra = [&](CollectiveOp inner, double size) {
    std::vector<CommPlan> parts;
    for (const auto& members : nodes) parts.push_back(RingPlan(inner, members, size, cluster, tuning));
    merge(parts);
  };
  auto inter = [&](CollectiveOp inner, double size) {
    std::vector<CommPlan> parts;
    for (size_t j = 0; j < k; ++j) {
      std::vector<DeviceId> rail;
      for (const auto& members : nodes) rail.push_back(members[j]);
      parts.push_back(RingPlan(inner, rail, size, cluster, tuning));
    }
    merge(parts);
  };
  switch (op) {
    case CollectiveOp::kAllReduce:
      intra(CollectiveOp::kReduceScatter, bytes);
      inter(CollectiveOp::kAllReduce, bytes / static_cast<double>(k));
      intra(CollectiveOp::kAllGather, bytes);
      break;
    case CollectiveOp::kReduceScatter:
      intra(CollectiveOp::kReduceScatter, bytes);
      inter(CollectiveOp::kReduceScatter, bytes / static_cast<double>(k));
      break;
    case CollectiveOp::kAllGather:
      inter(CollectiveOp::kAllGather, bytes / static_cast<double>(k));
      intra(CollectiveOp::kAllGather, bytes);
      break;
    default:
      break;
  }
  return plan;
}

std::optional<CommPlan> VendorHierarchicalPlan(CollectiveOp op, const std::vector<DeviceId>& group, double bytes,
                                               const Cluster& cluster, const CommTuning& tuning) {
  const auto vendors = ByVendor(group, cluster);
  if (vendors.size() < 2 || bytes <= 0) return std::nullopt;
  const size_t k = vendors.front().size();
  bool equal = true;
  for (const auto& members : vendors) equal = equal && members.size() == k;
  CommPlan plan;
  plan.algorithm = "vendor_hierarchical";
  // Inside each vendor's fabric, on its best hierarchical (or ring) plan, all at once.
  auto intra = [&](CollectiveOp inner, double size, const std::vector<std::vector<DeviceId>>& lists) {
    std::vector<CommPlan> parts;
    for (const auto& members : lists) parts.push_back(HierarchicalPlan(inner, members, size, cluster, tuning));
    MergeParallel(parts, plan);
  };
  // Across vendors: ring j joins the j-th member of every vendor.
  auto across = [&](CollectiveOp inner, double size, size_t rings) {
    std::vector<CommPlan> parts;
    for (size_t j = 0; j < rings; ++j) {
      std::vector<DeviceId> ring;
      for (const auto& members : vendors) ring.push_back(members[j]);
      parts.push_back(RingPlan(inner, ring, size, cluster, tuning));
    }
    MergeParallel(parts, plan);
  };
  if (equal) {
    const double shard = bytes / static_cast<double>(k);
    switch (op) {
      case CollectiveOp::kAllReduce:
        intra(CollectiveOp::kReduceScatter, bytes, vendors);
        across(CollectiveOp::kAllReduce, shard, k);
        intra(CollectiveOp::kAllGather, bytes, vendors);
        return plan;
      case CollectiveOp::kReduceScatter:
        intra(CollectiveOp::kReduceScatter, bytes, vendors);
        across(CollectiveOp::kReduceScatter, shard, k);
        return plan;
      case CollectiveOp::kAllGather:
        across(CollectiveOp::kAllGather, shard, k);
        intra(CollectiveOp::kAllGather, bytes, vendors);
        return plan;
      default:
        return std::nullopt;
    }
  }
  if (op != CollectiveOp::kAllReduce) return std::nullopt;
  // Vendors of different sizes: each reduces onto its leader (the chain ends at its last
  // member), the leaders all-reduce, and each leader broadcasts (the chain starts at it).
  std::vector<std::vector<DeviceId>> to_leader = vendors, from_leader;
  for (const auto& members : vendors) {
    std::vector<DeviceId> m(members.rbegin(), members.rend());
    from_leader.push_back(std::move(m));
  }
  intra(CollectiveOp::kReduce, bytes, to_leader);
  std::vector<DeviceId> leaders;
  for (const auto& members : vendors) leaders.push_back(members.back());
  MergeParallel({RingPlan(CollectiveOp::kAllReduce, leaders, bytes, cluster, tuning)}, plan);
  intra(CollectiveOp::kBroadcast, bytes, from_leader);
  return plan;
}

absl::StatusOr<CommPlan> VendorHierarchical::PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                            std::int64_t bytes, const Cluster& cluster) const {
  if (auto s = CheckArgs(group, bytes, cluster); !s.ok()) return s;
  const double size = static_cast<double>(bytes);
  if (auto plan = VendorHierarchicalPlan(op, group, size, cluster, tuning_)) return std::move(*plan);
  return HierarchicalPlan(op, group, size, cluster, tuning_);
}

absl::StatusOr<CommPlan> Hierarchical::PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                      std::int64_t bytes, const Cluster& cluster) const {
  if (auto s = CheckArgs(group, bytes, cluster); !s.ok()) return s;
  const double size = static_cast<double>(bytes);
  CommPlan best = HierarchicalPlan(op, group, size, cluster, tuning_);
  if (choose_fastest_) {
    for (CommPlan other : {RingPlan(op, group, size, cluster, tuning_), TreePlan(op, group, size, cluster, tuning_)}) {
      if (other.IsolatedTime(cluster) < best.IsolatedTime(cluster)) best = std::move(other);
    }
    if (auto vendor = VendorHierarchicalPlan(op, group, size, cluster, tuning_);
        vendor && vendor->IsolatedTime(cluster) < best.IsolatedTime(cluster)) {
      best = std::move(*vendor);
    }
  }
  return best;
}

}  // namespace testbed::collectives
