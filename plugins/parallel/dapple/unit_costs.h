// What the DAPPLE-style planner knows about a model: per unit (the embedding, each
// transformer block, the head; DAPPLE profiles whole layers) the forward and backward time of
// one micro-batch, the parameters, and the bytes it hands to the next unit.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/partitioner.h"

namespace testbed::dapple {

struct UnitCosts {
  std::vector<double> fwd, bwd;           // seconds per micro-batch
  std::vector<double> params;             // per tensor-parallel rank
  std::vector<double> output_bytes;       // activation sent to the next unit, per micro-batch
  std::vector<int> begin;                 // first layer of each unit, plus the end
};

[[nodiscard]] absl::StatusOr<UnitCosts> ProfileUnits(const PlanningContext& ctx, int tp, std::int64_t micro_batch);

}  // namespace testbed::dapple
