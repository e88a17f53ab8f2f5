// The integer program of Oases' planner (public code, oases/mpu/planner.py) over a chain of
// n ops (attention and MLP of each layer), solved exactly. Each op takes one of S candidate
// tensor-parallel degrees; the objective adds a term per op (its degree) and a term per edge
// (the degrees of the two ops it joins: resharding); the memory of the ops' degrees must stay
// within a budget. The public code hands this to CBC; the chain allows an exact labelling
// algorithm instead: for every op and degree, the Pareto set of (cost, memory) of the partial
// assignments ending there, each extended to the next op and pruned when dominated or when
// even the least memory of the remaining ops would not fit.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace testbed::oases {

struct ChainProblem {
  int ops = 0;
  int choices = 0;                      // S
  std::vector<std::vector<double>> node;  // [op][choice]: the op's own terms
  // [op][a * S + b]: the edge between op i (choice a) and op i + 1 (choice b); ops - 1 rows.
  std::vector<std::vector<double>> edge;
  std::vector<std::vector<double>> memory;  // [op][choice]: bytes
  double budget = 0;                        // bytes; the assignment's memory must not exceed it
};

struct ChainSolution {
  std::vector<int> choice;  // per op
  double cost = 0;
  double memory = 0;
  std::int64_t labels = 0;  // partial assignments kept (the search's size)
};

// Cost and memory of one assignment.
[[nodiscard]] double AssignmentCost(const ChainProblem& p, const std::vector<int>& choice);
[[nodiscard]] double AssignmentMemory(const ChainProblem& p, const std::vector<int>& choice);

// The least-cost assignment within the budget (ties: the first in the labelling's order).
// InvalidArgument for a malformed problem; ResourceExhausted when no assignment fits (the
// message gives the least memory any assignment needs and the budget).
[[nodiscard]] absl::StatusOr<ChainSolution> SolveChain(const ChainProblem& p);

}  // namespace testbed::oases
