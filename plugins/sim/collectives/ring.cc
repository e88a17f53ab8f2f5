#include "ring.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"

namespace testbed::collectives {

absl::Status CheckArgs(const std::vector<DeviceId>& group, std::int64_t bytes, const Cluster& cluster) {
  if (group.empty()) return absl::InvalidArgumentError("collective over an empty group");
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("negative size ", bytes));
  for (DeviceId d : group) {
    if (d < 0 || d >= cluster.num_devices()) {
      return absl::InvalidArgumentError(absl::StrCat("device ", d, " is not in cluster '", cluster.name(), "'"));
    }
  }
  return absl::OkStatus();
}

namespace {

// NCCL's channels on a group spanning nodes with the same number k > 1 of members on each:
// c rings, each carrying bytes / c, ring j visiting every node's members rotated by j * k / c,
// so that ring j leaves each node from another member (and its NIC). nullopt where it does
// not apply (one channel, one node, uneven nodes, other ops).
std::optional<CommPlan> ChannelRings(CollectiveOp op, const std::vector<DeviceId>& group, double bytes,
                                     const Cluster& cluster, const CommTuning& tuning) {
  const bool ring_op = op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllGather ||
                       op == CollectiveOp::kReduceScatter;
  if (tuning.ring_channels == 1 || !ring_op) return std::nullopt;
  const auto nodes = ByNode(group, cluster);
  const size_t k = nodes.front().size();
  bool uniform = nodes.size() > 1 && k > 1;
  for (const auto& members : nodes) uniform = uniform && members.size() == k;
  if (!uniform) return std::nullopt;
  const size_t c = tuning.ring_channels <= 0 ? k : std::min<size_t>(static_cast<size_t>(tuning.ring_channels), k);
  CommTuning one = tuning;
  one.ring_channels = 1;
  std::vector<CommPlan> rings;
  for (size_t j = 0; j < c; ++j) {
    std::vector<DeviceId> order;
    const size_t shift = j * k / c;
    for (const auto& members : nodes) {
      for (size_t i = 0; i < k; ++i) order.push_back(members[(i + shift) % k]);
    }
    rings.push_back(RingPlan(op, order, bytes / static_cast<double>(c), cluster, one));
  }
  CommPlan plan;
  plan.algorithm = "ring";
  MergeParallel(rings, plan);
  return plan;
}

}  // namespace

CommPlan RingPlan(CollectiveOp op, const std::vector<DeviceId>& group, double bytes, const Cluster& cluster,
                  const CommTuning& tuning) {
  CommPlan plan;
  plan.algorithm = "ring";
  const int n = static_cast<int>(group.size());
  if (n < 2 || bytes <= 0) return plan;
  if (auto channels = ChannelRings(op, group, bytes, cluster, tuning)) return *std::move(channels);
  auto ring_phase = [&](double per_hop, int steps, bool chain) {
    PhaseBuilder b(cluster, tuning);
    for (int i = 0; i < n - (chain ? 1 : 0); ++i) {
      b.Message(group[static_cast<size_t>(i)], group[static_cast<size_t>((i + 1) % n)], per_hop);
    }
    b.BuildInto(steps, plan.phases);
  };
  const double chunk = bytes / n;
  switch (op) {
    case CollectiveOp::kAllReduce:
      // Reduce-scatter then all-gather: the same hops twice, so one phase with twice the
      // bytes and steps (same time alone, and half the events to simulate).
      ring_phase(2 * chunk * (n - 1), 2 * (n - 1), false);
      break;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
      ring_phase(chunk * (n - 1), n - 1, false);
      break;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce:
      // Pipelined chain: every hop carries the whole buffer; the pipeline fills in n-1 steps.
      ring_phase(bytes, n - 1, true);
      break;
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kAllToAllV: {  // sizes per pair unknown here: planned as the uniform exchange
      PhaseBuilder b(cluster, tuning);
      for (DeviceId a : group) {
        for (DeviceId c : group) b.Message(a, c, chunk);
      }
      plan.algorithm = "direct";
      b.BuildInto(1, plan.phases);
      break;
    }
  }
  return plan;
}

CommPlan TransferPlan(DeviceId src, DeviceId dst, double bytes, const Cluster& cluster, const CommTuning& tuning) {
  CommPlan plan;
  plan.algorithm = "p2p";
  if (src == dst || bytes <= 0) return plan;
  PhaseBuilder b(cluster, tuning);
  b.Message(src, dst, bytes);
  b.BuildInto(1, plan.phases);
  return plan;
}

absl::StatusOr<CommPlan> DirectAllToAllV(const std::vector<DeviceId>& group, std::span<const std::int64_t> bytes,
                                         const Cluster& cluster, const CommTuning& tuning) {
  if (auto s = CheckArgs(group, 0, cluster); !s.ok()) return s;
  const size_t n = group.size();
  if (bytes.size() != n * n) {
    return absl::InvalidArgumentError(absl::StrCat("all-to-all-v over ", n, " members needs ", n * n, " sizes, got ",
                                                   bytes.size()));
  }
  CommPlan plan;
  plan.algorithm = "direct";
  PhaseBuilder b(cluster, tuning);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const std::int64_t v = bytes[i * n + j];
      if (v < 0) return absl::InvalidArgumentError(absl::StrCat("all-to-all-v: negative size ", v, " from member ", i, " to ", j));
      if (i == j || v == 0) continue;
      b.Message(group[i], group[j], static_cast<double>(v));
      any = true;
    }
  }
  if (any) b.BuildInto(1, plan.phases);
  return plan;
}

absl::StatusOr<CommPlan> TunedCollective::PlanAllToAllV(const std::vector<DeviceId>& group, std::span<const std::int64_t> bytes,
                                             const Cluster& cluster) const {
  return DirectAllToAllV(group, bytes, cluster, tuning_);
}

absl::StatusOr<CommPlan> Ring::PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group, std::int64_t bytes,
                                              const Cluster& cluster) const {
  if (auto s = CheckArgs(group, bytes, cluster); !s.ok()) return s;
  return RingPlan(op, group, static_cast<double>(bytes), cluster, tuning_);
}

absl::StatusOr<CommPlan> TunedCollective::PlanTransfer(DeviceId src, DeviceId dst, std::int64_t bytes,
                                            const Cluster& cluster) const {
  if (auto s = CheckArgs({src, dst}, bytes, cluster); !s.ok()) return s;
  return TransferPlan(src, dst, static_cast<double>(bytes), cluster, tuning_);
}

}  // namespace testbed::collectives
