// Partitioner component "autopipe_h": AutoPipe-H's heterogeneity-aware device mapping and
// balanced sub-layer partition (hetero_mapping.h) at the degrees of [parallel] (tensor
// parallelism 1, pp x dp = the cluster), with [train]'s micro-batch size and the request's
// recomputation. Pair it with `autopipe.slicer` for AutoPipe's micro-batch slicing.
#pragma once

#include "testbed/partitioner.h"

namespace testbed::autopipe {

class AutoPipeHPartitioner final : public Partitioner {
 public:
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;
};

}  // namespace testbed::autopipe
