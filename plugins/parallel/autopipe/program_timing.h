// AutoPipe's light pipeline simulator: when each operation of a pipeline program starts and
// ends, stages running in order and waiting only on their neighbours; no memory or link
// sharing, and exact for the full simulator when communication is free.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/pipeline_program.h"

namespace testbed::autopipe {

// Seconds of an operation of `kind` on `stage` for `fraction` of a micro-batch.
using OpCost = std::function<double(int stage, PipelineOp::Kind kind, double fraction)>;

struct ProgramTiming {
  double end_s = 0;      // the last operation's end
  double startup_s = 0;  // when the last stage starts its first forward
  std::vector<std::vector<double>> start_s, end_of;  // [stage][op index]
};

// `transfer_s[s]`: time to move a whole micro-batch's activation (or gradient) between stage s
// and s + 1, scaled by the micro-batch fraction; empty means free. Errors: a program that
// cannot run (an operation waiting on one that never comes).
[[nodiscard]] absl::StatusOr<ProgramTiming> TimeProgram(const PipelineProgram& program, const OpCost& cost,
                                                        const std::vector<double>& transfer_s = {});

}  // namespace testbed::autopipe
