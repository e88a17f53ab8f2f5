// HPH's layer partition for a mapping: the model's units split over the stages to maximise
// throughput (the busiest stage's work per iteration as small as possible), each stage costed
// on its slowest replica's device kind and fitted into its smallest memory; a stage whose
// units do not fit keeps only their checkpoints and recomputes them (recomputation-aware:
// memory-constrained GPUs still take a share of the layers, at the price of a second forward,
// which HPH's schedule moves into the pipeline's bubbles). Solved by the core's
// MinMaxContiguousSplit, then scored by a 1F1B estimate with the mapping's communication.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "hph_topology.h"

namespace testbed::hph {

struct Partition {
  std::vector<int> units;       // per stage
  std::vector<bool> recompute;  // per stage
  double estimate_s = 0;        // estimated iteration
  double comm_s = 0;            // the mapping's communication per iteration (CommTime)
};

// nullopt when no split fits. `m`: micro-batches per replica.
[[nodiscard]] absl::StatusOr<std::optional<Partition>> PartitionLayers(const PlanningContext& ctx, Profiles& profiles,
                                                                      const Mapping& mapping, int m);

// The activations and gradients each boundary and stage moves for a split (for CommTime).
void TrafficOf(const std::vector<UnitProfile>& units, const std::vector<int>& counts, double grad_bytes_per_param,
               std::vector<double>& boundary_bytes, std::vector<double>& grad_bytes);

}  // namespace testbed::hph
