// HeteroPP's layer split (H2): given the stage groups (which chip type runs which
// consecutive stages, at which degrees), the model units of every stage such that the
// busiest stage's work per iteration (its replicas' micro-batches x its time per
// micro-batch, on its own chip) is as small as possible and every stage fits its chip's
// memory with the activations 1F1B keeps at its position. Faster chips thus get more
// layers, and chips with more memory can sit early in the pipeline, where more micro-batches
// are in flight. Solved by the core's MinMaxContiguousSplit: exact for this objective
// whenever any single unit fits on any stage; otherwise the greedy may miss a split in which
// a small chip takes fewer units.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "hetero_cost.h"

namespace testbed::h2 {

// Units per stage, or nullopt when no split fits in memory.
[[nodiscard]] absl::StatusOr<std::optional<std::vector<int>>> SplitUnits(CostModel& model,
                                                                       const std::vector<StageGroup>& groups);

// Refines a split by the whole estimate (CostModel::Evaluate), not only the busiest stage:
// moves one unit across one boundary at a time while the estimated iteration shortens and
// every stage fits (with few micro-batches the pipeline's fill weighs as much as its
// bottleneck). Returns the estimate of the refined layout.
[[nodiscard]] absl::StatusOr<Estimate> RefineSplit(CostModel& model, Layout& layout);

}  // namespace testbed::h2
