#include "program_timing.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace testbed::autopipe {

absl::StatusOr<ProgramTiming> TimeProgram(const PipelineProgram& program, const OpCost& cost,
                                          const std::vector<double>& transfer_s) {
  using Kind = PipelineOp::Kind;
  const int pp = static_cast<int>(program.stages.size());
  ProgramTiming t;
  t.start_s.resize(static_cast<size_t>(pp));
  t.end_of.resize(static_cast<size_t>(pp));
  // End time of (stage, micro-batch) forward and backward; negative until done.
  const size_t mbs = static_cast<size_t>(program.NumMicroBatches());
  std::vector<std::vector<double>> fwd_end(static_cast<size_t>(pp), std::vector<double>(mbs, -1.0));
  std::vector<std::vector<double>> bwd_end = fwd_end;
  std::vector<size_t> next(static_cast<size_t>(pp), 0);
  std::vector<double> free_at(static_cast<size_t>(pp), 0.0);
  auto transfer = [&](int boundary, int mb) {
    if (transfer_s.empty()) return 0.0;
    return transfer_s[static_cast<size_t>(boundary)] * program.Fraction(mb);
  };
  size_t remaining = 0;
  for (const auto& ops : program.stages) remaining += ops.size();
  bool first_last_forward = true;
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < pp; ++s) {
      const auto& ops = program.stages[static_cast<size_t>(s)];
      // Run every operation of this stage whose inputs are ready.
      while (next[static_cast<size_t>(s)] < ops.size()) {
        const PipelineOp& op = ops[next[static_cast<size_t>(s)]];
        double ready = free_at[static_cast<size_t>(s)];
        const size_t mb = static_cast<size_t>(op.micro_batch);
        if (op.kind == Kind::kForward && s > 0) {
          const double prev = fwd_end[static_cast<size_t>(s - 1)][mb];
          if (prev < 0) break;
          ready = std::max(ready, prev + transfer(s - 1, op.micro_batch));
        }
        if (op.kind == Kind::kBackward && s + 1 < pp) {
          const double next_stage = bwd_end[static_cast<size_t>(s + 1)][mb];
          if (next_stage < 0) break;
          ready = std::max(ready, next_stage + transfer(s, op.micro_batch));
        }
        const double end = ready + cost(s, op.kind, program.Fraction(op.micro_batch));
        t.start_s[static_cast<size_t>(s)].push_back(ready);
        t.end_of[static_cast<size_t>(s)].push_back(end);
        if (op.kind == Kind::kForward) fwd_end[static_cast<size_t>(s)][mb] = end;
        if (op.kind == Kind::kBackward) bwd_end[static_cast<size_t>(s)][mb] = end;
        if (op.kind == Kind::kForward && s == pp - 1) {
          t.startup_s = first_last_forward ? ready : std::min(t.startup_s, ready);
          first_last_forward = false;
        }
        free_at[static_cast<size_t>(s)] = end;
        t.end_s = std::max(t.end_s, end);
        ++next[static_cast<size_t>(s)];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline program deadlocks with ", remaining,
                                                     " operations left"));
    }
  }
  return t;
}

}  // namespace testbed::autopipe
