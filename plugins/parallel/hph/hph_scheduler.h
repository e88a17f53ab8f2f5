// Scheduler component "hph": HPH's recomputation-aware schedule. 1F1B, in which the
// recomputation of every checkpointed micro-batch is its own operation placed right after the
// operation before that micro-batch's backward, so that it runs while the stage waits for the
// gradient (the pipeline's bubbles: the warm-up's wait for the first gradient, each steady
// cycle's wait, the drain) instead of after the gradient has arrived, as Megatron-LM's and
// DeepSpeed's runtimes do (1f1b with recompute_after_gradient = true, the baseline).
#pragma once

#include "testbed/pipeline_program.h"

namespace testbed::hph {

// The 1F1B program of `pp` stages over `micro_batches`, with a recompute before each backward
// of the stages flagged in `recompute`.
[[nodiscard]] PipelineProgram RecomputeInBubbles(int pp, int micro_batches, const std::vector<bool>& recompute);

class HphScheduler final : public Scheduler {
 public:
  explicit HphScheduler(ExpandOptions o) : o_(o) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override;

 private:
  ExpandOptions o_;
};

}  // namespace testbed::hph
