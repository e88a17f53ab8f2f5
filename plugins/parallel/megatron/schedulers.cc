#include "schedulers.h"

#include <algorithm>

#include "testbed/status_macros.h"

namespace testbed::megatron {

std::vector<ParamSpec> MegatronScheduleParams() {
  std::vector<ParamSpec> p = ExpandOptionParams();
  p.push_back(ParamSpec::Bool("tp_comm_overlap", false)
                  .Doc("tensor-parallel communication overlapped with the GEMMs around it, one chunk per TP rank "
                       "(Megatron-Core's tp_comm_overlap with Transformer Engine's userbuffers)"));
  return p;
}

absl::StatusOr<MegatronOptions> MegatronOptionsFrom(const ParamSet& params) {
  MegatronOptions o;
  TESTBED_ASSIGN_OR_RETURN(o.expand, ExpandOptionsFrom(params));
  TESTBED_ASSIGN_OR_RETURN(o.tp_comm_overlap, params.Get<bool>("tp_comm_overlap"));
  return o;
}

ExpandOptions MegatronOptions::For(const Plan& plan) const {
  ExpandOptions o = expand;
  int tp = 1;
  for (int s = 0; s < plan.pp(); ++s) tp = std::max(tp, plan.tp(s));
  if (tp_comm_overlap && tp > 1) {
    o.tp_chunks = std::min(tp, 16);
    o.tp_overlap = true;
    o.tp_chunk_join = true;
    o.tp_chunk_time_share = true;
  }
  return o;
}

absl::StatusOr<Schedule> OneFOneB::BuildSchedule(const SchedulingContext& ctx) {
  return ExpandOneFOneB(ctx, o_.For(ctx.plan), "1f1b");
}

absl::StatusOr<Schedule> Interleaved::BuildSchedule(const SchedulingContext& ctx) {
  const int pp = ctx.plan.pp(), chunks = ctx.plan.virtual_stages(), group = group_;
  return ExpandPipeline(
      ctx, ProgramSource([pp, chunks, group](int m) { return InterleavedProgram(pp, chunks, m, group); }),
      o_.For(ctx.plan));
}

}  // namespace testbed::megatron
