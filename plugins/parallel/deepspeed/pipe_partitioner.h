// DeepSpeed's pipeline partitioning (PipelineModule partition_method): "parameters" balances
// the parameter count of the stages, "uniform" the number of layers; DeepSpeed counts the
// embedding, each transformer block and the head as one layer each. Pipeline parallelism in
// DeepSpeed runs with ZeRO stage 1 at most. With `search`, it tries degrees, micro-batch
// sizes and recomputation like a careful DeepSpeed user and keeps the fastest plan.
#pragma once

#include "testbed/partitioner.h"

namespace testbed::deepspeed {

enum class Method { kParameters, kUniform };

// Stages for pp x chunks parts of `model` by `method`.
[[nodiscard]] absl::StatusOr<std::vector<StageSpec>> DeepSpeedStages(const ModelGraph& model, int parts, Method method);

class PipePartitioner final : public Partitioner {
 public:
  PipePartitioner(Method method, bool search, int zero_stage) : method_(method), search_(search), zero_(zero_stage) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  Method method_;
  bool search_;
  int zero_;
};

}  // namespace testbed::deepspeed
