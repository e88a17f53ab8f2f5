#include "shifted_critical_path.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace testbed::merak {
namespace {

using Kind = PipelineOp::Kind;

// Micro-batches of stage s whose recomputation runs before their gradient arrives. Merak's
// condition M - m + s < P (0-based m and s, as in its public schedule) selects the last
// P - s - 1 micro-batches: those whose backward falls in the cool-down phase, after the
// stage's last forward, where the stage would otherwise idle waiting for each gradient.
std::set<int> EarlySet(int pp, int m, int s, const ScpOptions& o) {
  std::set<int> early;
  if (o.early == EarlyRecompute::kNone) return early;
  for (int i = 0; i < m; ++i) {
    if (o.early == EarlyRecompute::kAll || m - i + s < pp) early.insert(i);
  }
  if (o.early == EarlyRecompute::kCooldown && o.shift_stage && pp >= 2) {
    // Around the shifted stage (Merak's FullCriticalPath schedule): stage P-2 recomputes its
    // first two micro-batches ahead (their gradients come late, after the extra forward) and
    // none of its cool-down ones; stage P-3 also recomputes its first micro-batch ahead,
    // since the swap on P-2 delays that gradient.
    if (s == pp - 2) early = {0, 1};
    if (s == pp - 3) early.insert(0);
  }
  return early;
}

}  // namespace

absl::StatusOr<PipelineProgram> ShiftedCriticalPathProgram(int pp, int m, const ScpOptions& o) {
  if (pp < 1) return absl::InvalidArgumentError("the pipeline needs at least one stage");
  // Merak's engine asserts both: four micro-batches for the shifted stage, and a full
  // pipeline (M >= P) for moving recomputation into the cool-down.
  if (m < 4 || m < pp) {
    return absl::InvalidArgumentError(absl::StrCat("the shifted critical path schedule needs at least 4 micro-batches "
                                                   "and at least one per stage (", pp, "); the plan has ", m));
  }
  PipelineProgram program = OneFOneBProgram(pp, m);
  for (int s = 0; s < pp; ++s) {
    std::vector<PipelineOp>& ops = program.stages[static_cast<size_t>(s)];
    const bool last = s == pp - 1;
    if (o.shift_stage && s == pp - 2) {
      // 1F1B on stage P-2 is F0 F1 B0 F2 B1 ...; the first backward slot runs F2 instead and
      // B0 follows it: F0 F1 F2 B0 B1 F3 ...
      auto first_bwd = std::find_if(ops.begin(), ops.end(), [](const PipelineOp& op) { return op.kind == Kind::kBackward; });
      if (first_bwd != ops.end() && first_bwd + 1 != ops.end() && (first_bwd + 1)->kind == Kind::kForward) {
        std::iter_swap(first_bwd, first_bwd + 1);
      }
    }
    if (last && !o.last_stage_recomputes) {
      // Rule (c): the last stage runs each backward right after its forward, so keeping the
      // activations costs one micro-batch's worth; it never checkpoints.
      for (PipelineOp& op : ops) {
        if (op.kind == Kind::kForward) op.checkpoint = 0;
      }
      continue;
    }
    if (last) continue;  // its backwards follow their forwards: nothing to move ahead
    const std::set<int> early = EarlySet(pp, m, s, o);
    std::vector<PipelineOp> out;
    out.reserve(ops.size() + early.size());
    for (const PipelineOp& op : ops) {
      if (op.kind == Kind::kBackward && early.count(op.micro_batch)) {
        out.push_back({Kind::kRecompute, op.chunk, op.micro_batch});
      }
      out.push_back(op);
    }
    ops = std::move(out);
  }
  return program;
}

}  // namespace testbed::merak
