// HeteroAuto's two-stage search (H2). Stage one chooses the stage groups: the order of the
// chip types along the pipeline (every permutation: where the cross-vendor boundaries fall,
// and which chips sit early, where 1F1B keeps the most activations), one data-parallel
// degree D for the pipeline and per chip type a TP degree t (a power of two inside a node,
// dividing the heads), so that type k runs N_k / (D x t) stages. Stage two splits the layers
// over those stages (SplitUnits). Every layout is scored by the cost model (CostModel::
// Evaluate); the best 4 x `finalists` that fit have their splits refined by the whole
// estimate (RefineSplit), and the best `finalists` of those go to the simulator, which picks
// the winner.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "hetero_cost.h"

namespace testbed::h2 {

struct SearchOptions {
  int finalists = 4;        // layouts handed to the simulator
  bool search_order = true;  // false: the chip types in the cluster's order
};

struct ScoredLayout {
  Layout layout;
  Estimate estimate;
};

struct SearchOutcome {
  std::vector<ScoredLayout> finalists;  // best estimate first
  std::int64_t groupings = 0;           // stage-group choices tried
  std::int64_t layouts = 0;             // of which split and estimated
};

// Calls `visit` with every stage-group choice of stage one (in a fixed order).
void ForEachGrouping(CostModel& model, bool search_order,
                     const std::function<void(const std::vector<StageGroup>&)>& visit);

// Errors: ResourceExhausted when no layout fits, naming the closest one's stage and chip.
[[nodiscard]] absl::StatusOr<SearchOutcome> SearchLayouts(CostModel& model, const SearchOptions& options);

}  // namespace testbed::h2
