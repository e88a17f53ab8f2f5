// Stage-to-stage traffic of the compute pass: the receive of an activation (forward) or a
// gradient (backward) before an op, the send after it, and, once every op is emitted, the
// pairing of each receive with its send. Stages may differ in replicas and tensor-parallel
// degree: micro-batch g of the iteration (counted over a stage's replicas in order) flows to
// the replica of the next stage that runs g, and receiving rank t gets it from sending rank
// t mod (the sender's degree).
#pragma once

#include <cstdint>

#include "expand/layer_hooks.h"

namespace testbed::expand {

// Receives into global chunk `g` of the lane's stage from stage `from_stage`; the lane's
// frontier becomes the receives.
void EmitRecv(Expansion& e, LaneState& ls, Phase phase, int g, int from_stage, std::int64_t bytes);
// Sends from the lane (after its frontier) to global chunk `to_g` on stage `to_stage`.
void EmitSend(Expansion& e, const LaneState& ls, Phase phase, int to_g, int to_stage, std::int64_t bytes);
// Bytes of the activation entering layer `first` of the lane's micro-batch.
[[nodiscard]] std::int64_t BoundaryBytes(const Expansion& e, const Lane& lane, int first);

}  // namespace testbed::expand
