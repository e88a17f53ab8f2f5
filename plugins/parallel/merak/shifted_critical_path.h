// Merak's shifted critical path schedule (Lai et al., TPDS 2023) as a pipeline program: 1F1B
// with the cool-down recomputation moved ahead of the gradient, no checkpointing on the last
// stage, and stage P-2 running its third forward before its first backward.
#pragma once

#include "absl/status/statusor.h"
#include "testbed/pipeline_program.h"

namespace testbed::merak {

// Which checkpointed micro-batches recompute ahead of their gradient (explicit recompute op).
enum class EarlyRecompute {
  kCooldown,  // Merak: on stage s, micro-batch m (0-based) of M when M - m + s < P
  kAll,       // every checkpointed micro-batch (not in Merak; an upper bound for ablations)
  kNone,      // none: every recomputation waits for its gradient, as in Megatron-LM
};

struct ScpOptions {
  EarlyRecompute early = EarlyRecompute::kCooldown;
  bool last_stage_recomputes = false;  // rule (c) when false
  bool shift_stage = true;             // rule (d): stage P-2 swaps its first backward and third forward
};

// Requires at least 4 micro-batches and at least as many as stages (InvalidArgument
// otherwise), as Merak's engine does.
[[nodiscard]] absl::StatusOr<PipelineProgram> ShiftedCriticalPathProgram(int pp, int micro_batches,
                                                                         const ScpOptions& options);

}  // namespace testbed::merak
