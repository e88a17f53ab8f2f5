// Kind `collective`: how a collective (or a point-to-point transfer) moves bytes over the
// cluster's links. The simulator runs the phases in order; within a phase, each link
// carries its bytes at its bandwidth shared fairly with every other transfer using it.
//
// Byte conventions (`bytes` argument): all-reduce, reduce, broadcast: the buffer each member
// holds; all-gather: the gathered output (each member contributes bytes / n); reduce-scatter:
// the input each member holds (each keeps bytes / n); all-to-all: what each member sends in
// total (bytes / n to each peer).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/cluster.h"
#include "testbed/component.h"
#include "testbed/schedule.h"

namespace testbed {

struct CommPhase {
  double latency_s = 0;                              // fixed cost before bytes flow
  std::vector<std::pair<LinkId, double>> link_bytes;  // bytes each link carries in this phase
};

struct CommPlan {
  std::string algorithm;  // "ring", "tree", "hierarchical", ...
  std::vector<CommPhase> phases;
  // Time on an otherwise idle cluster: sum over phases of latency + max(bytes / bandwidth).
  [[nodiscard]] double IsolatedTime(const Cluster& cluster) const;
};

class Collective : public Component {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kCollective;

  // Plans `op` over `group` (members in rank order, at least one). A group of one costs
  // nothing (no phases). Errors: InvalidArgument for a device outside the cluster or a
  // negative size; Unimplemented for an op the algorithm does not support.
  [[nodiscard]] virtual absl::StatusOr<CommPlan> PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                                std::int64_t bytes, const Cluster& cluster) const = 0;
  // A point-to-point transfer of `bytes` from `src` to `dst`.
  [[nodiscard]] virtual absl::StatusOr<CommPlan> PlanTransfer(DeviceId src, DeviceId dst, std::int64_t bytes,
                                                              const Cluster& cluster) const = 0;
};

}  // namespace testbed
