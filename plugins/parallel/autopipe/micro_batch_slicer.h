// AutoPipe's micro-batch slicer: the first micro-batches are split evenly into smaller ones
// so that the last stage starts sooner (pipeline start-up is the time until it runs its first
// forward); how many to split is solved by simulating each choice and keeping the fastest.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "program_timing.h"
#include "testbed/pipeline_program.h"

namespace testbed::autopipe {

// 1F1B over `micro_batches` micro-batches whose first `sliced` are each split into `parts`
// equal parts (listed in micro_batch_fraction).
[[nodiscard]] PipelineProgram SlicedOneFOneB(int pp, int micro_batches, int sliced, int parts);

struct SliceChoice {
  int sliced = 0;
  double iteration_s = 0, startup_s = 0;            // predicted, with the choice
  double base_iteration_s = 0, base_startup_s = 0;  // predicted, nothing sliced
};

// Tries 0..max_sliced sliced micro-batches (at most the first stage's warm-up, P - 1, and at
// most M) and keeps the fastest; among equally fast ones (within 1e-9) the one that starts
// soonest.
// `explicit_recompute[s]`: stage s recomputes before each backward as a separate operation
// (cost kRecompute) rather than inside it.
[[nodiscard]] absl::StatusOr<SliceChoice> ChooseSlices(int pp, int micro_batches, int parts, int max_sliced,
                                                       const OpCost& cost, const std::vector<double>& transfer_s,
                                                       const std::vector<bool>& explicit_recompute);

}  // namespace testbed::autopipe
