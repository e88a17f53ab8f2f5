#include "micro_batch_slicer.h"

#include <algorithm>

#include "testbed/status_macros.h"

namespace testbed::autopipe {
namespace {

// A copy of `program` with a recompute before every backward on the stages that recompute as a
// separate operation, so that the light simulator charges it where the expansion runs it.
PipelineProgram WithRecomputes(const PipelineProgram& program, const std::vector<bool>& explicit_recompute) {
  PipelineProgram out = program;
  for (size_t s = 0; s < out.stages.size(); ++s) {
    if (s >= explicit_recompute.size() || !explicit_recompute[s]) continue;
    std::vector<PipelineOp> ops;
    for (const PipelineOp& op : program.stages[s]) {
      if (op.kind == PipelineOp::Kind::kBackward) ops.push_back({PipelineOp::Kind::kRecompute, op.chunk, op.micro_batch});
      ops.push_back(op);
    }
    out.stages[s] = std::move(ops);
  }
  return out;
}

}  // namespace

PipelineProgram SlicedOneFOneB(int pp, int micro_batches, int sliced, int parts) {
  sliced = std::clamp(sliced, 0, micro_batches);
  parts = std::max(parts, 1);
  const int total = micro_batches + sliced * (parts - 1);
  PipelineProgram p = OneFOneBProgram(pp, total);
  if (sliced > 0 && parts > 1) {
    p.micro_batch_fraction.assign(static_cast<size_t>(total), 1.0);
    for (int i = 0; i < sliced * parts; ++i) p.micro_batch_fraction[static_cast<size_t>(i)] = 1.0 / parts;
  }
  return p;
}

absl::StatusOr<SliceChoice> ChooseSlices(int pp, int micro_batches, int parts, int max_sliced, const OpCost& cost,
                                         const std::vector<double>& transfer_s,
                                         const std::vector<bool>& explicit_recompute) {
  SliceChoice best;
  const int limit = std::clamp(max_sliced, 0, std::min(pp - 1, micro_batches));
  for (int k = 0; k <= limit; ++k) {
    const PipelineProgram program = WithRecomputes(SlicedOneFOneB(pp, micro_batches, k, parts), explicit_recompute);
    TESTBED_ASSIGN_OR_RETURN(ProgramTiming t, TimeProgram(program, cost, transfer_s));
    if (k == 0) {
      best = {0, t.end_s, t.startup_s, t.end_s, t.startup_s};
      continue;
    }
    // Equal within rounding (and transfer times of a few bytes): prefer the sooner start.
    const bool faster = t.end_s < best.iteration_s * (1 - 1e-9);
    const bool as_fast_earlier = t.end_s <= best.iteration_s * (1 + 1e-9) && t.startup_s < best.startup_s;
    if (faster || as_fast_earlier) {
      best.sliced = k;
      best.iteration_s = t.end_s;
      best.startup_s = t.startup_s;
    }
  }
  return best;
}

}  // namespace testbed::autopipe
