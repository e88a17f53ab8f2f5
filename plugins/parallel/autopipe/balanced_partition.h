// AutoPipe's planner (Liu et al., CLUSTER 2022): the exact min-max split of per-sub-layer cost,
// then a search that moves blocks around the critical stage, every candidate scored by a 1F1B
// simulation with 2P micro-batches; the fastest partition wins.
#pragma once

#include <vector>

#include "absl/status/statusor.h"

namespace testbed::autopipe {

struct PartitionScore {
  double iteration_s = 0;  // simulated 1F1B time with 2P micro-batches
  int critical_stage = 0;
};

struct BalancedPartition {
  std::vector<int> counts;   // items per stage
  PartitionScore score;
  PartitionScore dp_score;   // of the dynamic programme's partition, the search's start
  int candidates = 0;        // partitions simulated
};

// Scores a partition of items with per-item forward and backward times.
[[nodiscard]] absl::StatusOr<PartitionScore> ScorePartition(const std::vector<double>& fwd,
                                                            const std::vector<double>& bwd,
                                                            const std::vector<int>& counts);

// `heuristic` false stops after the dynamic programme. `max_candidates` bounds the search.
[[nodiscard]] absl::StatusOr<BalancedPartition> PlanPartition(const std::vector<double>& fwd,
                                                              const std::vector<double>& bwd, int stages,
                                                              bool heuristic = true, int max_candidates = 2000);

}  // namespace testbed::autopipe
