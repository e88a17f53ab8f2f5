// Scheduler component "merak.shifted_critical_path": Merak's shifted critical path program
// expanded into a task graph, with Merak's runtime conventions (recomputation inside the
// backward unless moved ahead; sub-pipelined tensor parallelism when the plan asks for it).
#pragma once

#include "shifted_critical_path.h"
#include "testbed/pipeline_program.h"
#include "testbed/scheduler.h"

namespace testbed::merak {

class ShiftedCriticalPathScheduler final : public Scheduler {
 public:
  // `shifted` false gives plain 1F1B with the same runtime conventions (the ablation arm).
  ShiftedCriticalPathScheduler(ExpandOptions expand, ScpOptions scp, bool shifted) noexcept
      : expand_(expand), scp_(scp), shifted_(shifted) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override;

  // The parameters it declares: the expansion options (less recompute_after_gradient, which
  // this runtime fixes) and the schedule's own switches.
  [[nodiscard]] static std::vector<ParamSpec> Params();
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Scheduler>> Make(const ParamSet& params);

 private:
  ExpandOptions expand_;
  ScpOptions scp_;
  bool shifted_;
};

}  // namespace testbed::merak
