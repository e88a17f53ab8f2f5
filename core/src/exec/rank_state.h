// What one rank of the executor holds while it runs its tasks: its place in the plan, its
// groups, its shard of the model and the optimizer, the step's data, and the tensors in flight
// between tasks (activations and gradients per model chunk and micro-batch, split into the
// sub-batches the schedule runs them in; received tensors; tensor-parallel all-reduces under
// way). The task handlers (compute_tasks.h, transfer_tasks.h, gradient_tasks.h) share it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "exec/executor.h"
#include "exec/param_shards.h"
#include "exec/weight_versions.h"
#include "testbed/communicator.h"
#include "testbed/train/optimizer.h"
#include "testbed/train/sequential_model.h"

namespace testbed::exec {

using Tensor = train::Matrix<float>;

// One micro-batch's tensor (its rows: samples x sequence) held as `count` equal blocks of
// samples; a reader may ask for another split and gets the rows sliced or joined.
class SampleBlocks {
 public:
  SampleBlocks() = default;
  SampleBlocks(int count, std::int64_t rows_per_sample, std::int64_t samples)
      : count_(count), rows_per_sample_(rows_per_sample), samples_(samples), blocks_(static_cast<size_t>(count)) {}

  [[nodiscard]] int count() const noexcept { return count_; }
  void Set(int block, Tensor m) { blocks_[static_cast<size_t>(block)] = std::move(m); }
  [[nodiscard]] bool Has(int block) const { return blocks_[static_cast<size_t>(block)].has_value(); }
  // Block `block` of `count` blocks. Errors: a block not set yet, splits that do not nest.
  [[nodiscard]] absl::StatusOr<Tensor> Get(int block, int count) const;

 private:
  int count_ = 1;
  std::int64_t rows_per_sample_ = 1, samples_ = 1;
  std::vector<std::optional<Tensor>> blocks_;
};

// Per-step traffic and timing of one rank (summed over ranks for the result).
struct StepMetrics {
  double pipeline_bytes = 0;       // stage-to-stage sends
  double data_parallel_bytes = 0;  // gradient exchange on the wire
  double tensor_parallel_bytes = 0;
  double encode_s = 0, decode_s = 0;
  double compressed_dense_bytes = 0, compressed_wire_bytes = 0;
  double loss = 0, grad_sq = 0;
  // Tensor-parallel all-reduces started before the compute that followed them in the rank's
  // order and waited for only after it: the overlap the schedule asked for, run for real.
  double tensor_parallel_overlapped = 0;
  // PipeDream-2BW: the stashed weight version and the gradients kept apart, at their most, on
  // the rank holding the most (bytes; not summed).
  double peak_stash_bytes = 0, peak_held_gradient_bytes = 0, weight_bytes = 0;
};

struct RankState {
  RankState(const ExecutorInputs& inputs, CommGroup& world_group) : in(inputs), world(world_group) {}

  const ExecutorInputs& in;
  CommGroup& world;
  int rank = 0, dp_rank = 0, stage = 0, tp_rank = 0;
  int tp = 1, pp = 1, dp = 1, chunks = 1;
  std::int64_t micro_batches = 1, seq = 1, hidden = 0;

  // Every group of the schedule this rank is a member of, by schedule group index.
  std::map<std::int32_t, std::unique_ptr<CommGroup>> groups;
  // Pipeline traffic: forward, backward, forward wrapping round, backward wrapping round.
  std::array<std::unique_ptr<CommGroup>, 4> p2p;

  train::SequentialModel<float> model;
  std::vector<train::Param<float>*> params;
  std::unique_ptr<train::Optimizer<float>> optimizer;
  // ZeRO (zero_stage >= 1 over two or more replicas): this rank's parts of its layers, which
  // the optimizer steps, and the replicas holding the same model shard.
  ParamShards shards;
  CommGroup* dp_group = nullptr;
  // Delayed SGD's queue of past gradients (null without a delay).
  std::unique_ptr<train::DelayedGradients<float>> delayed;
  std::int64_t step = 0;
  int applied_delay = 0;  // of the last optimizer step (StepRecord::applied_delay)

  // The step's batch; a schedule whose iterations overlap reads each iteration's from data_of.
  Batch data;
  bool overlapping = false;
  std::map<int, Batch> data_of;
  // Overlapping iterations: each iteration's loss and squared gradient norm (this rank's part).
  std::vector<double> loss_of, grad_sq_of;
  // PipeDream-2BW's weight versions and the gradients of one iteration kept apart from the next.
  WeightVersions versions;
  // Outputs of the last task run per (chunk, micro-batch): activations forward, gradients of
  // the chunk's input backward.
  using Key = std::pair<int, int>;
  std::map<Key, SampleBlocks> act, grad;
  // Received tensors, whole: (chunk, micro-batch, backward).
  std::map<std::pair<Key, bool>, SampleBlocks> received;
  // Layer caches and checkpointed inputs per (layer, micro-batch, sub-batch).
  using LayerKey = std::tuple<int, int, int>;
  std::map<LayerKey, train::LayerCache<float>> cache;
  std::map<LayerKey, Tensor> checkpoint;

  StepMetrics metrics;

  [[nodiscard]] std::int64_t SamplesPerMicroBatch() const { return in.plan.micro_batch; }
  // The key of a task's micro-batch among those in flight: its index counted over iterations
  // (a schedule whose iterations overlap has micro-batches of two iterations in flight).
  [[nodiscard]] int Slot(const Task& t) const {
    return static_cast<int>(static_cast<std::int64_t>(t.iteration) * micro_batches + t.micro_batch);
  }
  // The batch of `iteration` (loaded on first use when iterations overlap).
  [[nodiscard]] absl::StatusOr<const Batch*> DataOf(int iteration);
  void AddLoss(int iteration, double loss);
  void AddGradSq(int iteration, double sq);
  // Rows of the global batch of micro-batch `mb` of this rank's replica.
  [[nodiscard]] std::int64_t FirstSample(int mb) const {
    return (static_cast<std::int64_t>(dp_rank) * micro_batches + mb) * in.plan.micro_batch;
  }
  [[nodiscard]] CommGroup* Group(std::int32_t index) const {
    auto it = groups.find(index);
    return it == groups.end() ? nullptr : it->second.get();
  }
  [[nodiscard]] bool HoldsLayer(int l) const;
};

}  // namespace testbed::exec
