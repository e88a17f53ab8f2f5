#include "schedulers.h"

#include "testbed/status_macros.h"

namespace testbed::megatron {

absl::StatusOr<Schedule> OneFOneB::BuildSchedule(const SchedulingContext& ctx) {
  return ExpandOneFOneB(ctx, o_, "1f1b");
}

absl::StatusOr<Schedule> Interleaved::BuildSchedule(const SchedulingContext& ctx) {
  const int pp = ctx.plan.pp(), chunks = ctx.plan.virtual_stages();
  return ExpandPipeline(
      ctx, ProgramSource([pp, chunks](int m) { return InterleavedProgram(pp, chunks, m); }), o_);
}

}  // namespace testbed::megatron
