// ZeRO-3 / FSDP (zero_stage = 3 on a stage of two or more data-parallel replicas): every
// device keeps 1/dp of each layer's weights, and before each use of a layer (its forward, its
// recompute, its backward, per micro-batch) the replicas holding the same tensor-parallel shard
// all-gather the layer's weights on the parameter stream (streams::kParamComm); the compute
// waits for its gather. Prefetch: a device's k-th gather may start once its (k-2)-th use has
// ended, so the next layer's weights arrive while the current layer computes and at most two
// layers are gathered at a time (FSDP's forward and backward prefetch of one layer, with its
// limit on all-gathers in flight). The gradients are reduce-scattered after the final backward
// (the gradient-sync pass), the optimizer steps on the shard, and the next iteration's gathers
// wait for the step. Compute is emitted layer by layer on such stages (layer_hooks.cc).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "expand/expansion.h"

namespace testbed::expand {

// A layer's piece on one link class (HSDP, Plan::param_links): its share of the layer's bytes,
// the kinds its collectives are pinned to, and the streams its gather and reduce-scatter take.
struct ParamPiece {
  LinkKinds links = 0;
  double share = 1;
  std::uint8_t gather_stream = streams::kParamComm;
  std::uint8_t scatter_stream = streams::kDataComm;
};
// The pieces of layer `l` with a share above zero (one piece on any links without a split).
[[nodiscard]] std::vector<ParamPiece> PiecesOf(const Plan& plan, int l);

// Whether stage `s` shards its parameters (ZeRO-3 over two or more replicas).
[[nodiscard]] bool ShardsParameters(const Expansion& e, int s);

// Checks up front what the model of ZeRO-3 needs: every replica of a sharded stage runs the
// same op sequence (each gather is a collective of all of them), no expert parallelism and a
// single weight version on such stages.
[[nodiscard]] absl::Status CheckParameterSharding(const Expansion& e);

class ParameterGathers {
 public:
  // The gathers the compute of layers [first, end) of `lane` on tensor-parallel ranks
  // [first_rank, first_rank + degree) in `phase` must wait for (made on first need); empty on
  // a stage that does not shard its parameters.
  [[nodiscard]] std::vector<TaskId> Before(Expansion& e, const Lane& lane, Phase phase, int first_rank, int degree,
                                           int first, int end);
  // The compute `use` that Before(...) was asked for has been added: the gather two places
  // later on each of its devices waits for it (the prefetch limit).
  void Used(Expansion& e, const std::vector<TaskId>& gathers, TaskId use);
  // After the compute pass: each iteration's gathers wait for the previous iteration's
  // optimizer step on every member (the shard they gather is the updated one).
  void AfterSteps(Expansion& e) const;

 private:
  // (iteration, stage, chunk, micro-batch, layer, phase, tensor-parallel rank).
  using Key = std::tuple<int, int, int, int, int, int, int>;
  struct Gather {
    std::vector<TaskId> ids;  // one per piece of the layer
    int iteration = 0;
    std::vector<DeviceId> members;
    size_t index = 0;  // among its (stage, tensor-parallel rank)'s gathers, in creation order
  };
  std::map<Key, Gather> gathers_;
  std::map<std::pair<int, int>, std::vector<std::vector<TaskId>>> order_;  // (stage, tp rank) -> gathers in order
  std::map<TaskId, std::pair<std::pair<int, int>, size_t>> where_;  // gather -> (stage, tp rank), index
  // Uses whose later gather (by (stage, tp rank) and index) is not made yet.
  std::map<std::pair<std::pair<int, int>, size_t>, std::vector<TaskId>> pending_;
};

}  // namespace testbed::expand
