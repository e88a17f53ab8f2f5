// Megatron-LM's pipeline partition: transformer blocks split evenly over the pipeline stages
// (and over the model chunks of interleaved schedules); the embedding joins the first
// stage and the output head the last.
#pragma once

#include "testbed/partitioner.h"

namespace testbed::megatron {

// Stages for `pp` x `chunks` model chunks of `model`, blocks split evenly (earlier chunks
// take the remainder). Fails when there are fewer blocks than chunks.
[[nodiscard]] absl::StatusOr<std::vector<StageSpec>> UniformBlockStages(const ModelGraph& model, int pp, int chunks);

// Degrees, micro-batching and mapping from [parallel] and [train], checked against the
// cluster; stages from UniformBlockStages; recomputation applied to every layer for "full".
[[nodiscard]] absl::StatusOr<Plan> UniformPlan(const PlanningContext& ctx, int tp, int pp, int dp, int chunks,
                                               std::int64_t micro_batch);

class UniformPartitioner final : public Partitioner {
 public:
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;
};

}  // namespace testbed::megatron
