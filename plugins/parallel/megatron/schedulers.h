// Megatron-LM's pipeline schedules: 1F1B (PipeDream-Flush) and interleaved 1F1B with
// virtual stages (Narayanan et al. 2021). Megatron-Core's overlaps are options: the gradient
// reduce during the backward (dp_overlap, its overlap_grad_reduce), the weight gather under the
// next forward (param_gather_overlap, its overlap_param_gather) and `tp_comm_overlap`
// (Transformer Engine's userbuffers): each tensor-parallel layer in one chunk per TP rank, each
// chunk's collective overlapping the next chunk's compute and the next layer waiting for the
// whole result (ExpandOptions::tp_chunk_join), the chunks costed as shares of the layer
// (tp_chunk_time_share), since only the GEMMs are chunked.
#pragma once

#include "testbed/pipeline_program.h"

namespace testbed::megatron {

// The expansion options every pipeline scheduler takes, and tp_comm_overlap.
[[nodiscard]] std::vector<ParamSpec> MegatronScheduleParams();
struct MegatronOptions {
  ExpandOptions expand;
  bool tp_comm_overlap = false;
  // The options for a plan: with tp_comm_overlap, as many chunks as the largest TP degree (at
  // most 16), overlapped, joined and costed as shares.
  [[nodiscard]] ExpandOptions For(const Plan& plan) const;
};
[[nodiscard]] absl::StatusOr<MegatronOptions> MegatronOptionsFrom(const ParamSet& params);

class OneFOneB final : public Scheduler {
 public:
  explicit OneFOneB(MegatronOptions o) : o_(o) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override;

 private:
  MegatronOptions o_;
};

// Megatron-Core's interleaved schedule table: micro-batches in groups of `group` (its
// microbatch_group_size_per_vp_stage; 0: InterleavedProgram's default), so any micro-batch
// count of at least the depth runs, as Llama 3 tuned it.
class Interleaved final : public Scheduler {
 public:
  Interleaved(MegatronOptions o, int group) : o_(o), group_(group) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override;

 private:
  MegatronOptions o_;
  int group_ = 0;
};

}  // namespace testbed::megatron
