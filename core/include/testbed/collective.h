// Kind `collective`: how a collective (or a point-to-point transfer) moves bytes over the
// cluster's links. The simulator runs the phases in order; within a phase, each link
// carries its bytes at its bandwidth shared fairly with every other transfer using it.
//
// Byte conventions (`bytes` argument): all-reduce, reduce, broadcast: the buffer each member
// holds; all-gather: the gathered output (each member contributes bytes / n); reduce-scatter:
// the input each member holds (each keeps bytes / n); all-to-all: what each member sends in
// total (bytes / n to each peer). An all-to-all-v gives bytes per (sender, receiver).
#pragma once

#include <cstdint>
#include <span>
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
  // An all-to-all-v over `group`: bytes[i * n + j] from member i to member j (n = group size;
  // the diagonal stays on its device and costs nothing). Errors as PlanCollective, and
  // InvalidArgument when bytes does not hold n x n entries.
  [[nodiscard]] virtual absl::StatusOr<CommPlan> PlanAllToAllV(const std::vector<DeviceId>& group,
                                                               std::span<const std::int64_t> bytes,
                                                               const Cluster& cluster) const = 0;
};

// A copy of `bytes` between host memory `host` (Cluster::hosts of the device's node; -1: the
// device's nearest) and `device`, along Cluster::HostRoute: one phase whose latency is the
// route's and whose links carry the bytes. Shared by every collective model, since a copy
// has no algorithm to choose.
[[nodiscard]] absl::StatusOr<CommPlan> HostCopyPlan(DeviceId device, int host, bool to_device, std::int64_t bytes,
                                                    const Cluster& cluster);

// Host staging of messages between devices of different vendors, when the cluster stages
// them (Cluster::cross_vendor() == kHostStaged): the legs that a set of concurrent messages
// (one phase of a collective, or a transfer) adds before and after its network leg, which is
// the messages' usual route. Shared by every collective model.
//   to_host:   each sender's device-to-host copy over Cluster::HostRoute (nearest host), then
//              the host copy: its latency includes, per host, the bytes the host copies over
//              Cluster::host_copy_bytes_per_s (hosts copy in parallel, one host's copies one
//              after another);
//   from_host: each receiver's host-to-device copy.
// So an isolated staged message of S bytes over PCIe of bandwidth P, host copy C and network
// N costs S/P + S/C + S/N + S/P plus the latencies. Messages between devices of one vendor,
// and every message when the cluster is device-direct, add nothing.
class HostStagingLegs {
 public:
  explicit HostStagingLegs(const Cluster& cluster) : cluster_(cluster) {}
  // One message of `bytes` from a to b, sent in `steps` rounds (each round pays the legs'
  // latencies once).
  void Message(DeviceId a, DeviceId b, double bytes, int steps = 1);
  [[nodiscard]] bool empty() const noexcept { return host_bytes_.empty(); }
  // Appends to_host, then `network`, then from_host to `phases` (only `network` when empty()).
  void Wrap(CommPhase network, std::vector<CommPhase>& phases) const;

 private:
  const Cluster& cluster_;
  std::vector<std::pair<LinkId, double>> to_host_, from_host_;  // summed in Wrap
  std::vector<std::pair<std::int64_t, double>> host_bytes_;     // (node * 1024 + host, bytes copied)
  double to_host_latency_s_ = 0, from_host_latency_s_ = 0;
};

}  // namespace testbed
