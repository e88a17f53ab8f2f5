#include "schedulers.h"

#include "testbed/status_macros.h"

namespace testbed::megatron {

absl::StatusOr<Schedule> OneFOneB::BuildSchedule(const SchedulingContext& ctx) {
  if (ctx.plan.virtual_stages() != 1) {
    return absl::InvalidArgumentError("1f1b runs one model chunk per stage; use interleaved_1f1b for virtual stages");
  }
  const int pp = ctx.plan.pp();
  return ExpandPipeline(
      ctx, ProgramSource([pp](int m) -> absl::StatusOr<PipelineProgram> { return OneFOneBProgram(pp, m); }), o_);
}

absl::StatusOr<Schedule> Interleaved::BuildSchedule(const SchedulingContext& ctx) {
  const int pp = ctx.plan.pp(), chunks = ctx.plan.virtual_stages();
  return ExpandPipeline(
      ctx, ProgramSource([pp, chunks](int m) { return InterleavedProgram(pp, chunks, m); }), o_);
}

}  // namespace testbed::megatron
