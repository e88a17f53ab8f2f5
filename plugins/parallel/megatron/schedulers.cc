#include "schedulers.h"

#include "testbed/status_macros.h"

namespace testbed::megatron {

absl::StatusOr<Schedule> OneFOneB::BuildSchedule(const SchedulingContext& ctx) {
  if (ctx.plan.virtual_stages != 1) {
    return absl::InvalidArgumentError("1f1b runs one model chunk per stage; use interleaved_1f1b for virtual stages");
  }
  return ExpandPipeline(ctx, OneFOneBProgram(ctx.plan.pp, static_cast<int>(ctx.plan.micro_batches)), o_);
}

absl::StatusOr<Schedule> Interleaved::BuildSchedule(const SchedulingContext& ctx) {
  TESTBED_ASSIGN_OR_RETURN(PipelineProgram program,
                           InterleavedProgram(ctx.plan.pp, ctx.plan.virtual_stages,
                                              static_cast<int>(ctx.plan.micro_batches)));
  return ExpandPipeline(ctx, program, o_);
}

}  // namespace testbed::megatron
