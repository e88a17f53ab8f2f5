// Partitioner component "hph" (HPH: hybrid parallelism on heterogeneous clusters): for every
// pipeline depth pp dividing the cluster (dp = devices / pp, tensor parallelism off), the
// topology designer's mappings (hph_topology.h), each with its throughput-maximising,
// recomputation-aware partition over layers and micro-batches (hph_partition.h); the best
// `finalists` by the estimate are simulated and the fastest is the plan. Pair it with the `hph` scheduler, which moves the
// recomputation into the pipeline's bubbles.
#pragma once

#include "testbed/partitioner.h"

namespace testbed::hph {

struct HphOptions {
  int finalists = 4;
  bool design_topology = true;  // false: stage-major always (the ablation of the designer)
};

class HphPartitioner final : public Partitioner {
 public:
  explicit HphPartitioner(HphOptions options) : options_(options) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  HphOptions options_;
};

}  // namespace testbed::hph
