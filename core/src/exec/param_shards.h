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
  // copies the part of the current weights.
  void Build(train::SequentialModel<float>& model, const std::vector<int>& layers, int dp, int dp_rank);
  [[nodiscard]] bool active() const noexcept { return !shards_.empty(); }
  // The parameters the optimizer steps: one per layer, this rank's part (1 x its elements).
  [[nodiscard]] std::vector<train::Param<float>*> Params();

  // Layer `layer`'s full weights from every member's part (no-op for a layer not sharded here).
  [[nodiscard]] absl::Status Gather(CommGroup& group, int layer);
  [[nodiscard]] absl::Status GatherAll(CommGroup& group);
  // The full gradients of the sharded layers in [first, end) reduced over the group into this
  // rank's part (added to what it holds); returns the bytes this rank sent.
  [[nodiscard]] absl::StatusOr<double> ReduceScatter(CommGroup& group, int first, int end);
  // Squared norm of this rank's part of the gradient, counting a tensor-parallel replicated
  // tensor on tensor rank 0 only (`counted(name)`: whether this rank counts tensor `name`).
  [[nodiscard]] double GradSq(const std::function<bool(const std::string&)>& counted) const;
  // After the step: zero the full gradients and the parts', and poison the full weights.
  void AfterStep();

 private:
  struct Shard {
    int layer = 0;
    std::vector<train::Param<float>*> full;  // the layer's tensors, flattened in this order
    std::vector<std::int64_t> counts;        // elements per member
    std::int64_t offset = 0;                 // this rank's first element
    train::Param<float> part;
  };
  Shard* Find(int layer);
  [[nodiscard]] std::vector<float> Flatten(const Shard& s, bool gradients) const;

  std::vector<std::unique_ptr<Shard>> shards_;  // stable addresses: the optimizer keys on them
};

}  // namespace testbed::exec
