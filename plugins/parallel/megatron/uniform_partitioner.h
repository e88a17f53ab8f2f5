// Megatron-LM's pipeline partition: transformer blocks split evenly over the pipeline stages
// (and over the model chunks of interleaved schedules); the embedding joins the first
// stage and the output head the last. With `search`, it tries the degrees, micro-batch
// sizes and recomputation a careful Megatron-LM user would, and keeps the fastest plan.
#pragma once

#include "testbed/partitioner.h"

namespace testbed::megatron {

class UniformPartitioner final : public Partitioner {
 public:
  explicit UniformPartitioner(bool search) : search_(search) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  bool search_;
};

}  // namespace testbed::megatron
