// Partitioner component "autopipe": AutoPipe's planner on the model's sub-layers (or whole
// blocks, for comparison), with the degrees, micro-batch size and recomputation either given
// ([parallel], [train]) or searched like Megatron-LM's baseline does.
#pragma once

#include "testbed/partitioner.h"

namespace testbed::autopipe {

struct AutoPipeOptions {
  bool search = false;
  bool heuristic = true;  // false: the dynamic programme's partition only
  bool sublayers = true;  // false: whole transformer blocks
  int max_candidates = 2000;
};

class AutoPipePartitioner final : public Partitioner {
 public:
  explicit AutoPipePartitioner(AutoPipeOptions o) noexcept : o_(o) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  AutoPipeOptions o_;
};

}  // namespace testbed::autopipe
