// The compute of one pipeline op, layer by layer. A range of layers is cut into runs that
// one hook emits each:
//   dense           — layers without tensor-parallel traffic: one task for the run (a gang
//                     over the tensor-parallel group), cut at the layers that close gradient
//                     buckets when it is the final backward;
//   tensor_parallel — layers split over a tensor-parallel group: a task per layer (per
//                     sub-batch with ExpandOptions::tp_chunks) and the all-reduce each needs,
//                     on the compute stream or, overlapping, on the tensor-comm stream;
//   expert_parallel — a MoE layer whose experts are spread over an expert-parallel group:
//                     gate on every rank, dispatch all-to-all-v with the iteration's routing,
//                     experts on the tokens each rank received, combine all-to-all-v.
// Runs differ in tensor-parallel degree (a plan's per-layer degrees; a stage of T devices runs
// a layer of degree t as T / t groups on t / T of the micro-batch each), precision or kind;
// between runs of different degrees the activations (gradients, backward) are resharded by an
// all-to-all-v over the replica's devices.
#pragma once

#include <vector>

#include "expand/expansion.h"

namespace testbed::expand {

// A replica walking one op, and what its next task waits for (per tensor-parallel rank).
struct LaneState {
  Lane lane;
  Frontier frontier;
};

struct RangeRequest {
  Phase phase = Phase::kForward;
  bool checkpoint = false;      // forward keeping only its input
  int first = 0, end = 0;       // layers [first, end); backward runs them descending
  bool final_backward = false;  // the backward that makes the layers' gradients final
  // Backward with ExpandOptions::recompute_interleaved: the checkpointed layers
  // [recompute_first, recompute_end) are recomputed each just before its own backward.
  int recompute_first = 0, recompute_end = 0;
  // > 1: a forward whose dense run's first two layers (an embedding and the recurrent layer it
  // feeds) go in this many parts of their time steps (sub-batch p of time_parts, a share of the
  // steps each, LayerPart::kTimeSlice), one after another, the rest of the run whole after them
  // (EmbRace's per-row priority: each part waits only for its rows); the parts are recorded in
  // Expansion::forward_parts.
  int time_parts = 1;
  // The first forward of an iteration's chunk while the weights are gathered per bucket
  // (ExpandOptions::param_gather_overlap): dense runs end a piece at each bucket boundary, so
  // that each piece waits only for its own bucket's gather.
  bool gathered_forward = false;
};

// Emits layers [first, end) of one op for every lane (one replica, or an expert-parallel
// group running the op in lock-step) and advances each lane's frontier.
[[nodiscard]] absl::Status EmitRange(Expansion& e, std::vector<LaneState>& lanes, const RangeRequest& req);

}  // namespace testbed::expand
