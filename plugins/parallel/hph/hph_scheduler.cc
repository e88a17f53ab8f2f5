#include "hph_scheduler.h"

#include "absl/strings/str_cat.h"

namespace testbed::hph {

PipelineProgram RecomputeInBubbles(int pp, int micro_batches, const std::vector<bool>& recompute) {
  PipelineProgram program = OneFOneBProgram(pp, micro_batches);
  for (int s = 0; s < pp && s < static_cast<int>(recompute.size()); ++s) {
    if (!recompute[static_cast<size_t>(s)]) continue;
    std::vector<PipelineOp> ops;
    for (const PipelineOp& op : program.stages[static_cast<size_t>(s)]) {
      if (op.kind == PipelineOp::Kind::kBackward) {
        PipelineOp r = op;
        r.kind = PipelineOp::Kind::kRecompute;
        ops.push_back(r);
      }
      ops.push_back(op);
    }
    program.stages[static_cast<size_t>(s)] = std::move(ops);
  }
  return program;
}

absl::StatusOr<Schedule> HphScheduler::BuildSchedule(const SchedulingContext& ctx) {
  const int pp = ctx.plan.pp();
  if (ctx.plan.virtual_stages() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler 'hph' runs one model chunk per stage; the plan has ", ctx.plan.virtual_stages()));
  }
  std::vector<bool> recompute;
  for (const Stage& st : ctx.plan.stages) recompute.push_back(st.chunks.front().recompute_layers > 0);
  return ExpandPipeline(ctx, ProgramSource([pp, recompute](int m) -> absl::StatusOr<PipelineProgram> {
                          return RecomputeInBubbles(pp, m, recompute);
                        }),
                        o_);
}

}  // namespace testbed::hph
