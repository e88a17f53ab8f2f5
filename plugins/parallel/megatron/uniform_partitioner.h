// Megatron-LM's pipeline partition: transformer blocks split evenly over the pipeline stages
// (and over the model chunks of interleaved schedules); the embedding joins the first
// stage and the output head the last, or Megatron-Core's uneven split (uneven_split.h). With
// `search`, it tries the degrees, micro-batch sizes and recomputation a careful Megatron-LM
// user would, and keeps the fastest plan. `distributed_optimizer` shards the optimizer state
// (and fp32 master weights) over the data-parallel ranks: gradients reduce-scattered, weights
// all-gathered after the step (ZeRO-1, at least).
#pragma once

#include "testbed/partitioner.h"
#include "uneven_split.h"

namespace testbed::megatron {

class UniformPartitioner final : public Partitioner {
 public:
  UniformPartitioner(bool search, UnevenSplit split, bool distributed_optimizer)
      : search_(search), split_(split), distributed_optimizer_(distributed_optimizer) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  [[nodiscard]] absl::StatusOr<Plan> Build(const PlanningContext& ctx) const;

  bool search_;
  UnevenSplit split_;
  bool distributed_optimizer_;
};

}  // namespace testbed::megatron
