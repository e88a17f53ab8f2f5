// ZeRO sharding in the executor (zero_stage 1 to 3): each layer's parameters, flattened, are
// split over the data-parallel replicas that hold the same model shard, this rank keeping
// part `dp_rank` (with its gradient and optimizer state: the optimizer steps the shards). The
// schedule's tasks move the rest:
//   reduce-scatter (data-parallel stream) — the layers' full gradients summed over the group,
//                                           this rank keeping its part;
//   all-gather (parameter stream, ZeRO-3: before each use of a layer; data-parallel stream,
//               ZeRO-1/2: after the step) — the full weights from every member's part.
// After each step the full weights are filled with NaN until gathered again, so that a use
// the schedule did not gather for shows in the loss. The full tensors stay allocated between
// uses (the executor checks the algorithm, not its memory; the simulator counts the memory).
//
// Under a split of the weights over link classes (HSDP, Plan::param_links) each layer's
// flattened parameters are first cut into consecutive pieces, piece c holding share c of the
// elements (rounded to the nearest element), and each piece is sharded over the members on its
// own: the schedule's tasks on the class's streams (streams::LinkClassOf) move piece c alone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/communicator.h"
#include "testbed/train/param.h"
#include "testbed/train/sequential_model.h"

namespace testbed::exec {

class ParamShards {
 public:
  // Splits the layers in `layers` of `model` over `dp` members, keeping part `dp_rank`, and
  // copies the part of the current weights. `shares[l]` cuts layer l into pieces first (a
  // layer without a row, or an empty `shares`: one piece).
  void Build(train::SequentialModel<float>& model, const std::vector<int>& layers, int dp, int dp_rank,
             const std::vector<std::vector<double>>& shares = {});
  [[nodiscard]] bool active() const noexcept { return !shards_.empty(); }
  // The parameters the optimizer steps: one per layer, this rank's part (1 x its elements).
  [[nodiscard]] std::vector<train::Param<float>*> Params();

  // Piece `piece` of layer `layer`'s full weights from every member's part (no-op for a piece
  // not sharded here: a layer of another stage, or a piece without elements).
  [[nodiscard]] absl::Status Gather(CommGroup& group, int layer, int piece = 0);
  // Every piece of every sharded layer in [first, end) (a bucket's layers), or of all of them.
  [[nodiscard]] absl::Status GatherRange(CommGroup& group, int first, int end);
  [[nodiscard]] absl::Status GatherAll(CommGroup& group);
  // Piece `piece` of the full gradients of the sharded layers in [first, end) reduced over
  // the group into this rank's part (added to what it holds); returns the bytes this rank sent.
  [[nodiscard]] absl::StatusOr<double> ReduceScatter(CommGroup& group, int first, int end, int piece = 0);
  // Squared norm of this rank's part of the gradient, counting a tensor-parallel replicated
  // tensor on tensor rank 0 only (`counted(name)`: whether this rank counts tensor `name`).
  [[nodiscard]] double GradSq(const std::function<bool(const std::string&)>& counted) const;
  // After the step: zero the full gradients and the parts', and poison the full weights.
  void AfterStep();

 private:
  struct Shard {
    int layer = 0;
    int piece = 0;
    std::vector<train::Param<float>*> full;  // the layer's tensors, flattened in this order
    std::int64_t begin = 0, end = 0;         // the piece: elements [begin, end) of the flattened layer
    std::vector<std::int64_t> counts;        // the piece's elements per member
    std::int64_t offset = 0;                 // this rank's first element, within the piece
    train::Param<float> part;
  };
  Shard* Find(int layer, int piece);
  // Elements [s.begin, s.end) of the layer's flattened values or gradients.
  [[nodiscard]] std::vector<float> Flatten(const Shard& s, bool gradients) const;

  std::vector<std::unique_ptr<Shard>> shards_;  // stable addresses: the optimizer keys on them
};

}  // namespace testbed::exec
