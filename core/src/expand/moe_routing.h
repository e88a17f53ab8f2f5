// Where a MoE layer's tokens go in one micro-batch: the iteration's routing (StepInput::routing,
// or tokens spread evenly over the experts) onto the iteration's expert placement (StepInput,
// else the plan's): a token for an expert stays on its rank when the rank holds a copy of the
// expert, else it goes evenly to the expert's holders; with a capacity factor, what a rank
// sends an expert beyond capacity_factor x (its tokens x top_k / experts) is dropped.
#pragma once

#include <vector>

#include "expand/expansion.h"

namespace testbed::expand {

struct TokenExchange {
  int ranks = 0;
  std::vector<double> tokens;         // [src * ranks + dst], a token routed to k experts counts k times
  std::vector<double> expert_tokens;  // per rank: tokens its experts compute
  double dropped = 0;                 // over capacity
};

[[nodiscard]] ExpertPlacement PlacementFor(const Expansion& e, int iteration, int layer);
// `ranks` is the expert-parallel group size; `micro_batch` the samples of the micro-batch.
[[nodiscard]] absl::StatusOr<TokenExchange> ExchangeFor(const Expansion& e, const Lane& lane, int layer,
                                                        std::int64_t micro_batch, int ranks);

}  // namespace testbed::expand
