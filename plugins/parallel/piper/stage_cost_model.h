// Piper's cost of a candidate stage (Tarnawski et al., NeurIPS 2021): its load per iteration
// (compute, transfers, gradient all-reduce) and whether it fits with the activations 1F1B keeps.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/partitioner.h"

namespace testbed::piper {

struct Unit {
  double fwd = 0, bwd = 0;   // seconds per micro-batch
  double params = 0;         // per tensor-parallel rank
  double activation = 0;     // bytes kept for backward per micro-batch (no recomputation)
  double checkpoint = 0;     // bytes kept per micro-batch when recomputed (its input)
  double output_bytes = 0;   // activation handed to the next unit per micro-batch
  int first_layer = 0, end_layer = 0;
};

struct Environment {
  int pp = 1, dp = 1, micro_batches = 1;
  std::vector<double> send_s_per_byte, send_latency;  // per stage boundary
  std::vector<double> allreduce_s_per_param;           // per stage
  std::vector<double> capacity_bytes;                  // per stage
  double static_bytes_per_param = 16;                  // weights, gradients, optimizer state
};

struct StageChoice {
  double load = 0;       // seconds per iteration; infinity when it does not fit
  bool recompute = false;
};

// Units of the model (embedding, blocks, head) at this TP degree and micro-batch size.
[[nodiscard]] absl::StatusOr<std::vector<Unit>> ProfileUnits(const PlanningContext& ctx, int tp, std::int64_t micro_batch);
// The cheaper of the two recomputation choices for units [first, end) as stage `stage`.
[[nodiscard]] StageChoice CostStage(const std::vector<Unit>& units, int first, int end, int stage, const Environment& env);

}  // namespace testbed::piper
