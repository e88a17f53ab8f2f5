// What moving one byte of a sharded layer's all-gather or reduce-scatter costs on each link
// class: the collective model plans the operation over the data-parallel group on the
// cluster's view over that class (Cluster::Over), and the plan, divided by its size, gives
// each link's seconds per buffer byte and the class's fixed latency. Links that two classes
// share keep one entry per class, so the cost model sees their loads add up (a lower bound:
// the simulator's fair sharing can be slower); CheckIndependent refuses such classes unless
// the planner is told to share (shared_links = "add").
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
// (large enough that rounding of per-member shares does not matter); without a collective,
// with the planner's own model: a ring in group order, each of its n - 1 steps moving 1/n of
// the buffer from every member to the next over the class's route and paying the slowest
// hop's latency (what the simulator's ring does at full efficiency). InvalidArgument when a
// class has no route between two members (naming the class), or when two classes are the
// same.
[[nodiscard]] absl::StatusOr<std::vector<ClassCost>> LinkClassCosts(const std::vector<DeviceId>& group,
                                                                    const std::vector<LinkKinds>& classes,
                                                                    const Cluster& cluster,
                                                                    const Collective* collective = nullptr,
                                                                    double reference_bytes = 1 << 30);

// HSDP rests on the links of different classes working independently: OK when no two
// classes' collectives cross a common link, else InvalidArgument naming the link.
[[nodiscard]] absl::Status CheckIndependent(const std::vector<ClassCost>& classes, const Cluster& cluster);

}  // namespace testbed::hsdp
