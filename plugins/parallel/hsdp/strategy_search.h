// HSDP's planner: the strategy of least cost (strategy_cost.h), found as a mixed integer
// linear programme solved by CBC, and by enumeration on small problems (the reference the
// programme is tested against).
//
// The programme: integer chunks n(l, c) in [0, chunks] with sum over c of n(l, c) = chunks, a
// binary y(l, c) >= n(l, c) / chunks that charges the class's latency when layer l uses it,
// and one variable per term of the cost (first gather, each forward and backward step, last
// scatter) bounded below by the step's compute and by each link's load, whose sum is
// minimised.
#pragma once

#include "absl/status/statusor.h"
#include "strategy_cost.h"

namespace testbed::hsdp {

struct SearchResult {
  Strategy strategy;
  double cost_s = 0;     // StrategyCost of the strategy
  bool optimal = false;  // the solver proved it optimal (within its tolerance)
};

// Errors: InvalidArgument for an empty class list or chunks < 1; Internal when CBC finds no
// solution (it always exists: every layer on one class).
[[nodiscard]] absl::StatusOr<SearchResult> SolveMilp(const Problem& problem, double time_limit_s = 60);

// Every strategy, for at most `max_strategies` of them (InvalidArgument beyond).
[[nodiscard]] absl::StatusOr<SearchResult> Enumerate(const Problem& problem, double max_strategies = 2e6);

}  // namespace testbed::hsdp
