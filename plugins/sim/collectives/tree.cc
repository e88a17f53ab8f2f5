#include "tree.h"

#include <cmath>

#include "ring.h"

namespace testbed::collectives {

CommPlan TreePlan(CollectiveOp op, const std::vector<DeviceId>& group, double bytes, const Cluster& cluster,
                  const CommTuning& tuning) {
  const int n = static_cast<int>(group.size());
  if (op != CollectiveOp::kAllReduce || n < 3) return RingPlan(op, group, bytes, cluster, tuning);
  CommPlan plan;
  plan.algorithm = "tree";
  const int depth = static_cast<int>(std::ceil(std::log2(static_cast<double>(n + 1))));
  // Tree 1 over ranks 0..n-1 in heap order; tree 2 over the ranks in reverse, so that the
  // inner nodes of one are leaves of the other. Each carries half the buffer.
  auto member = [&](int tree, int i) { return group[static_cast<size_t>(tree == 0 ? i : n - 1 - i)]; };
  for (int direction = 0; direction < 2; ++direction) {  // 0: reduce up, 1: broadcast down
    PhaseBuilder b(cluster, tuning);
    for (int tree = 0; tree < 2; ++tree) {
      for (int i = 1; i < n; ++i) {
        const DeviceId child = member(tree, i), parent = member(tree, (i - 1) / 2);
        if (direction == 0) {
          b.Message(child, parent, bytes / 2);
        } else {
          b.Message(parent, child, bytes / 2);
        }
      }
    }
    b.BuildInto(depth, plan.phases);
  }
  return plan;
}

absl::StatusOr<CommPlan> Tree::PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group, std::int64_t bytes,
                                              const Cluster& cluster) const {
  if (auto s = CheckArgs(group, bytes, cluster); !s.ok()) return s;
  return TreePlan(op, group, static_cast<double>(bytes), cluster, tuning_);
}

}  // namespace testbed::collectives
