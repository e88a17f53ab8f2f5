// Megatron-LM's tensor parallelism as a tp_planner: one degree for every layer. With
// `degree` = 0 the degree is the fastest one that fits in memory, each candidate (powers of
// two dividing the stage's devices and every layer) scored by the simulator with the run's
// scheduler, the way a Megatron-LM user picks TP by trying; a given degree is taken as it is.
#pragma once

#include "testbed/tp_planner.h"

namespace testbed::megatron {

class UniformTp final : public TpPlanner {
 public:
  explicit UniformTp(int degree) : degree_(degree) {}
  [[nodiscard]] absl::StatusOr<TpAssignment> Assign(const RefineContext& ctx) override;

 private:
  int degree_ = 0;
};

}  // namespace testbed::megatron
