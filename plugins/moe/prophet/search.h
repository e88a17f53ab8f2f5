// The two planners' searches over expert placements of one MoE layer, both scored by the
// cost model (cost_model.h) on the routing they plan from.
//
// Pro-Prophet (locality-based greedy, PAPERS.md): repeatedly take the rank that computes the
// most tokens and, of the experts it holds, the one it computes most for; copy that expert
// to every rank but the owner and the n (0 .. max_excluded) ranks that demand it least,
// choosing n by the cost model; re-route; remember the cheapest placement of the sequence
// (the best prefix). Stop when max H - min H < alpha x I / E (I: the tokens one rank routes,
// E: experts), when the expert to copy already has copies (an expert repeats), or when no
// rank holds an expert to copy.
//
// Prophet (our reading; its full text was not available): a fine-grained search over each
// expert's copies one at a time: every move adds one copy of one expert on the rank that
// demands it most among those without it, the move that lowers the cost most; stop when no
// move lowers it or after max_moves moves.
#pragma once

#include "cost_model.h"

namespace testbed::prophet {

struct SearchResult {
  ExpertPlacement placement;
  LayerCost cost;
  LayerCost start_cost;  // the placement it started from
  int steps = 0;         // experts copied (Pro-Prophet) or copies added (Prophet)
};

struct GreedyOptions {
  double alpha = 3;
  int max_excluded = 1;
};

[[nodiscard]] SearchResult ProProphetSearch(const MoeLayerShape& shape, const CostConstants& k, const Routing& demand,
                                            const GreedyOptions& options);
[[nodiscard]] SearchResult ProphetSearch(const MoeLayerShape& shape, const CostConstants& k, const Routing& demand,
                                         int max_moves);

}  // namespace testbed::prophet
