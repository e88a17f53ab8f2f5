// HPH's topology designer: where the stages and replicas of a data-parallel pipeline (pp
// stages x dp replicas, no tensor parallelism) sit on a heterogeneous cluster, so that the
// communication takes the least time. Devices are first ordered fastest kind first (by the
// model's time on the kind), then by node and position in the node. Two mappings of that
// order are weighed for each (pp, dp):
//   stage-major:    stage s's replicas are devices s*dp .. s*dp+dp-1 (a stage's gradient
//                   all-reduce stays inside a node where dp allows; the activations cross);
//   pipeline-major: replica r's stages are devices r*pp .. r*pp+pp-1 (activations stay inside a
//                   node; the all-reduces cross).
// Each mapping is partitioned (hph_partition.h) and weighed by its estimate, whose
// communication (CommTime) is every boundary's activations and gradients over the slowest
// replica's path plus the largest stage's ring all-reduce over the slowest link of its ring:
// on a heterogeneous cluster the mapping with the least communication alone can put kinds
// together in a stage, so its compute is weighed with it [our reading of "minimises the
// communication time cost"].
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hph_profile.h"

namespace testbed::hph {

struct Mapping {
  int pp = 1, dp = 1;
  bool stage_major = true;
  std::vector<DeviceId> devices;  // [replica * pp + stage]
  [[nodiscard]] DeviceId At(int stage, int replica) const {
    return devices[static_cast<size_t>(replica * pp + stage)];
  }
};

// The cluster's devices, fastest kind first, then by node and local index.
[[nodiscard]] absl::StatusOr<std::vector<DeviceId>> SpeedOrder(Profiles& profiles, const Cluster& cluster);

// The stage-major and pipeline-major mappings of `order` for pp x dp.
[[nodiscard]] std::vector<Mapping> Mappings(const std::vector<DeviceId>& order, int pp, int dp);

// A mapping's communication: one micro-batch's activations and gradients across every
// boundary (the slowest replica's path each), and the largest stage's gradient all-reduce.
struct CommCost {
  double per_micro_batch_s = 0;
  double all_reduce_s = 0;               // the largest stage's
  std::vector<double> stage_all_reduce_s;  // per stage
  [[nodiscard]] double PerIteration(double micro_batches) const {
    return micro_batches * per_micro_batch_s + all_reduce_s;
  }
};
// boundary_bytes[b]: one micro-batch's activation across boundary b (its gradient comes back
// the same size); grad_bytes[s]: stage s's gradients.
[[nodiscard]] CommCost CommTime(const Mapping& mapping, const Cluster& cluster, const std::vector<double>& boundary_bytes,
                                const std::vector<double>& grad_bytes);

}  // namespace testbed::hph
