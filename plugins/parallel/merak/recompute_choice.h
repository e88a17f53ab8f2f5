// Choosing Merak's recomputation ratio r0 for a plan: the smallest (in whole layers of the first
// stage) that fits; a memory estimate proposes it and the run's simulator, when there is one,
// confirms it (a refusal for memory moves on to the next ratio).
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/metrics.h"
#include "testbed/partitioner.h"

namespace testbed::merak {

enum class RecomputePolicy { kStageAware, kUniform, kNone };

struct RecomputeChoice {
  double r0 = 0;
  std::vector<double> ratios;  // per stage
  MetricSet metrics;           // of the plan with these ratios
  int evaluations = 0;         // plans scored
};

// Activation and state bytes of `stage` at its peak when `in_flight` micro-batches are held
// (all but one checkpointed as the plan says, one with all its activations).
[[nodiscard]] double StagePeakBytes(const Plan& plan, const ModelGraph& model, const TrainSettings& train, int stage,
                                    int in_flight);
// Micro-batches stage s holds at once: P - s under 1F1B, 3 on stage P-2 under the shifted
// critical path (it runs one more forward before its first backward), at most M.
[[nodiscard]] int InFlight(const Plan& plan, int stage, bool shifted);

using Evaluate = std::function<absl::StatusOr<MetricSet>(const Plan&)>;

// Sets plan's recompute layers for the smallest r0 that fits and returns the choice. `shifted`:
// the plan runs under the shifted critical path (stage P-2's ratio and in-flight count).
// Errors: ResourceExhausted when even full recomputation does not fit; errors of `evaluate`.
[[nodiscard]] absl::StatusOr<RecomputeChoice> ChooseRecompute(const PlanningContext& ctx, Plan& plan,
                                                              RecomputePolicy policy, bool shifted,
                                                              const Evaluate& evaluate);

}  // namespace testbed::merak
