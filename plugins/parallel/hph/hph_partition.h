// HPH's partition for a mapping, among the workers: the model's units split over the stages
// and the iteration's micro-batches over the replicas (pipelines) so as to maximise
// throughput. A stage's work per iteration is, over its replicas, the largest micro-batch
// count times that replica's device time for the stage's units (the busiest as small as
// possible, by the core's MinMaxContiguousSplit); each replica then gets micro-batches in
// proportion to its pipeline's pace (a pipeline of RTX 3090s takes more than one of 2080 Tis),
// and the split is made again for those counts. A stage fits into its smallest memory; one
// whose units do not fit keeps only their checkpoints and recomputes them (recomputation-
// aware: memory-constrained GPUs still take a share of the layers, at the price of a second
// forward, which HPH's schedule moves into the bubbles). Scored by a 1F1B estimate (the
// slowest pipeline: its stages' times plus (m_r - 1) x its slowest stage) with the mapping's
// communication.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "hph_topology.h"

namespace testbed::hph {

struct Partition {
  std::vector<int> units;       // per stage
  std::vector<bool> recompute;  // per stage
  std::vector<int> micro_batches;  // per replica, summing to the iteration's
  double estimate_s = 0;        // estimated iteration
  double comm_s = 0;            // the mapping's communication per iteration (CommTime)
};

// nullopt when no split fits. `total`: the iteration's micro-batches (at least dp).
[[nodiscard]] absl::StatusOr<std::optional<Partition>> PartitionLayers(const PlanningContext& ctx, Profiles& profiles,
                                                                      const Mapping& mapping, int total);

// The activations and gradients each boundary and stage moves for a split (for CommTime).
void TrafficOf(const std::vector<UnitProfile>& units, const std::vector<int>& counts, double grad_bytes_per_param,
               std::vector<double>& boundary_bytes, std::vector<double>& grad_bytes);

}  // namespace testbed::hph
