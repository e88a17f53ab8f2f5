#include "hierarchical.h"

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
  // Phases run one after another; each inner phase moves on every node (or every rail) at
  // once, so the plans of the parallel sub-rings are merged phase by phase.
  auto merge = [&](const std::vector<CommPlan>& parallel) {
    size_t phases = 0;
    for (const auto& p : parallel) phases = std::max(phases, p.phases.size());
    for (size_t i = 0; i < phases; ++i) {
      CommPhase merged;
      std::map<LinkId, double> loads;
      for (const auto& p : parallel) {
        if (i >= p.phases.size()) continue;
        merged.latency_s = std::max(merged.latency_s, p.phases[i].latency_s);
        for (const auto& [l, b] : p.phases[i].link_bytes) loads[l] += b;
      }
      merged.link_bytes.assign(loads.begin(), loads.end());
      plan.phases.push_back(std::move(merged));
    }
  };
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

absl::StatusOr<CommPlan> Hierarchical::PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                      std::int64_t bytes, const Cluster& cluster) const {
  if (auto s = CheckArgs(group, bytes, cluster); !s.ok()) return s;
  const double size = static_cast<double>(bytes);
  CommPlan best = HierarchicalPlan(op, group, size, cluster, tuning_);
  if (choose_fastest_) {
    for (CommPlan other : {RingPlan(op, group, size, cluster, tuning_), TreePlan(op, group, size, cluster, tuning_)}) {
      if (other.IsolatedTime(cluster) < best.IsolatedTime(cluster)) best = std::move(other);
    }
  }
  return best;
}

absl::StatusOr<CommPlan> Hierarchical::PlanTransfer(DeviceId src, DeviceId dst, std::int64_t bytes,
                                                    const Cluster& cluster) const {
  if (auto s = CheckArgs({src, dst}, bytes, cluster); !s.ok()) return s;
  return TransferPlan(src, dst, static_cast<double>(bytes), cluster, tuning_);
}

absl::StatusOr<CommPlan> Hierarchical::PlanAllToAllV(const std::vector<DeviceId>& group, std::span<const std::int64_t> bytes,
                                                const Cluster& cluster) const {
  return DirectAllToAllV(group, bytes, cluster, tuning_);
}

}  // namespace testbed::collectives
