// What moving one byte of a sharded layer's all-gather or reduce-scatter costs on each link
// class: the collective model plans the operation over the data-parallel group on the
// cluster's view over that class (Cluster::Over), and the plan, divided by its size, gives
// each link's seconds per buffer byte and the class's fixed latency. Links that two classes
// share (a NIC both cross) keep one entry per class, so the cost model sees them add up.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/cluster.h"
#include "testbed/collective.h"

namespace testbed::hsdp {

struct OpCost {
  double latency_s = 0;                             // sum of the plan's phase latencies
  std::vector<std::pair<LinkId, double>> s_per_byte;  // per link: seconds per byte of the buffer
};

struct ClassCost {
  LinkKinds kinds = 0;  // the class (0: every kind, the cluster's own routes)
  std::string name;     // "nvlink", "pcie+cpu"
  OpCost gather;        // all-gather of the layer's weights
  OpCost scatter;       // reduce-scatter of its gradients
};

// Plans both operations over `group` on each class with `collective`, at `reference_bytes`
// (large enough that rounding of per-member shares does not matter). InvalidArgument when a
// class has no route between two members (naming the class), or when two classes are the
// same.
[[nodiscard]] absl::StatusOr<std::vector<ClassCost>> LinkClassCosts(const std::vector<DeviceId>& group,
                                                                    const std::vector<LinkKinds>& classes,
                                                                    const Cluster& cluster, const Collective& collective,
                                                                    double reference_bytes = 1 << 30);

}  // namespace testbed::hsdp
