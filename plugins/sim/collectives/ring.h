// Ring algorithms (NCCL's default for large messages): n members pass chunks of bytes / n
// around the ring. All-reduce = reduce-scatter then all-gather, 2(n-1) steps, each member
// sending 2(n-1)/n of the buffer: time 2(n-1)/n * S/B + 2(n-1) * alpha on uniform links.
#pragma once

#include "link_loads.h"

namespace testbed::collectives {

// What every algorithm of this plugin shares: its tuning, a point-to-point transfer on its
// route (TransferPlan) and all-to-all-v as one direct phase (DirectAllToAllV); an algorithm
// supplies PlanCollective.
class TunedCollective : public Collective {
 public:
  explicit TunedCollective(CommTuning tuning) : tuning_(tuning) {}
  [[nodiscard]] absl::StatusOr<CommPlan> PlanTransfer(DeviceId src, DeviceId dst, std::int64_t bytes,
                                                      const Cluster& cluster) const final;
  [[nodiscard]] absl::StatusOr<CommPlan> PlanAllToAllV(const std::vector<DeviceId>& group,
                                                       std::span<const std::int64_t> bytes,
                                                       const Cluster& cluster) const final;

 protected:
  CommTuning tuning_;
};

class Ring final : public TunedCollective {
 public:
  using TunedCollective::TunedCollective;
  [[nodiscard]] absl::StatusOr<CommPlan> PlanCollective(CollectiveOp op, const std::vector<DeviceId>& group,
                                                        std::int64_t bytes, const Cluster& cluster) const override;
};

// Checks members and size; shared by all algorithms of this plugin.
[[nodiscard]] absl::Status CheckArgs(const std::vector<DeviceId>& group, std::int64_t bytes, const Cluster& cluster);
// Plans on rings and direct exchanges, for any op; used by the other algorithms too.
[[nodiscard]] CommPlan RingPlan(CollectiveOp op, const std::vector<DeviceId>& group, double bytes,
                                const Cluster& cluster, const CommTuning& tuning);
// All-to-all-v as one direct phase: every member sends bytes[i * n + j] to member j at once,
// so the time is the most loaded link's bytes over its bandwidth, plus the slowest path's
// latency. Errors: InvalidArgument unless bytes has n x n entries, none negative.
[[nodiscard]] absl::StatusOr<CommPlan> DirectAllToAllV(const std::vector<DeviceId>& group,
                                                       std::span<const std::int64_t> bytes, const Cluster& cluster,
                                                       const CommTuning& tuning);
[[nodiscard]] CommPlan TransferPlan(DeviceId src, DeviceId dst, double bytes, const Cluster& cluster,
                                    const CommTuning& tuning);

}  // namespace testbed::collectives
