#include "scp_scheduler.h"

#include <algorithm>
#include <cmath>

#include "testbed/status_macros.h"

namespace testbed::merak {

std::vector<ParamSpec> ShiftedCriticalPathScheduler::Params() {
  std::vector<ParamSpec> params;
  for (ParamSpec& p : ExpandOptionParams()) {
    if (p.name() != "recompute_after_gradient") params.push_back(std::move(p));
  }
  params.push_back(ParamSpec::Bool("shifted", true)
                       .Doc("the shifted critical path schedule; false: plain 1F1B with the same runtime"));
  params.push_back(ParamSpec::Choice("early_recompute", "cooldown", {"cooldown", "all", "none"})
                       .Doc("checkpointed micro-batches recomputed while waiting for their gradient: "
                            "Merak's cool-down ones, all, or none"));
  params.push_back(ParamSpec::Bool("last_stage_recomputes", false)
                       .Doc("let the last stage recompute (Merak never does)"));
  params.push_back(ParamSpec::Bool("shift_stage", true)
                       .Doc("stage P-2 runs its third forward before its first backward"));
  return params;
}

absl::StatusOr<std::unique_ptr<Scheduler>> ShiftedCriticalPathScheduler::Make(const ParamSet& p) {
  TESTBED_ASSIGN_OR_RETURN(ExpandOptions expand, ExpandOptionsFrom(p));
  // Merak's engine recomputes a checkpointed micro-batch inside its backward, after the
  // gradient arrived, unless the schedule moved the recomputation ahead.
  expand.recompute_after_gradient = true;
  ScpOptions scp;
  TESTBED_ASSIGN_OR_RETURN(const std::string early, p.Get<std::string>("early_recompute"));
  scp.early = early == "all" ? EarlyRecompute::kAll : early == "none" ? EarlyRecompute::kNone : EarlyRecompute::kCooldown;
  TESTBED_ASSIGN_OR_RETURN(scp.last_stage_recomputes, p.Get<bool>("last_stage_recomputes"));
  TESTBED_ASSIGN_OR_RETURN(scp.shift_stage, p.Get<bool>("shift_stage"));
  TESTBED_ASSIGN_OR_RETURN(bool shifted, p.Get<bool>("shifted"));
  return std::make_unique<ShiftedCriticalPathScheduler>(expand, scp, shifted);
}

absl::StatusOr<Schedule> ShiftedCriticalPathScheduler::BuildSchedule(const SchedulingContext& ctx) {
  const Plan& plan = ctx.plan;
  if (plan.virtual_stages() != 1) {
    return absl::InvalidArgumentError("merak.shifted_critical_path runs one model chunk per stage");
  }
  ExpandOptions expand = expand_;
  // Sub-pipelined tensor parallelism is a planner decision (Merak's partitioner sets it).
  if (plan.knobs.tp_chunks >= 1) {
    expand.tp_chunks = plan.knobs.tp_chunks;
    expand.tp_overlap = expand.tp_overlap || expand.tp_chunks > 1;
  }
  const int pp = plan.pp();
  const bool shifted = shifted_;
  const auto scp = scp_;
  ProgramSource programs = [pp, shifted, scp](int m) -> absl::StatusOr<PipelineProgram> {
    if (shifted) return ShiftedCriticalPathProgram(pp, m, scp);
    return OneFOneBProgram(pp, m);
  };
  return ExpandPipeline(ctx, programs, expand);
}

}  // namespace testbed::merak
