// The executor's compute: a task's layers forward, backward or recomputed for its micro-batch
// (or its sub-batch of it), with the inputs they take (the data, a received tensor, the
// previous task's output) and what they leave (the next task's input, the loss gradient, the
// checkpoint). A tensor-parallel shard of a split layer (gpt_stack.h) stops at its partial
// result; the schedule's all-reduce task then starts the reduction asynchronously
// (StartAllReduce), and whichever task next reads that output waits for it and finishes the
// layer, so another sub-batch's compute runs while the all-reduce is on the wire.
#pragma once

#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "exec/rank_state.h"
#include "testbed/schedule.h"

namespace testbed::exec {

class ComputeTasks {
 public:
  explicit ComputeTasks(RankState& s) : s_(s) {}

  [[nodiscard]] absl::Status Run(const Task& t);
  // The schedule's tensor-parallel all-reduce after compute task `t`'s layer: starts reducing
  // its partial result. A layer replicated over the group (embedding, head) computed its whole
  // result on every rank: nothing to reduce.
  [[nodiscard]] absl::Status StartAllReduce(const Task& t);
  // The whole output (forward) or input gradient (backward) of chunk `chunk` for a
  // micro-batch (its RankState::Slot), every pending all-reduce waited for: what a send carries.
  [[nodiscard]] absl::StatusOr<Tensor> Whole(int chunk, int micro_batch, bool backward);
  // Waits for every all-reduce still under way (recomputation's, whose result nothing reads).
  [[nodiscard]] absl::Status Drain();
  // Tasks run so far this step (the clock that tells an overlapped all-reduce).
  void Tick() noexcept { ++tick_; }

 private:
  // A split layer stopped at its partial result, for (chunk, micro-batch, sub-batch, phase).
  struct Pending {
    int layer = 0;
    int chunk = 0;
    int subs = 1;    // sub-batches of its task's micro-batch
    Tensor input;    // forward: the layer's input; backward: the gradient of its output
    Tensor partial;  // reduced in place
    CommRequestPtr request;
    std::int64_t started_at = -1;  // tick at which the all-reduce started
  };
  using PendingKey = std::tuple<int, int, int, int>;  // layer, micro-batch, sub-batch, phase

  absl::Status Forward(const Task& t, bool recompute);
  absl::Status Backward(const Task& t);
  absl::StatusOr<Tensor> ForwardInput(const Task& t);
  absl::StatusOr<Tensor> BackwardInput(const Task& t);
  // Block `sub` of `subs` of the chunk's output, finishing a pending layer first.
  absl::StatusOr<Tensor> Read(std::map<RankState::Key, SampleBlocks>& store, int chunk, int mb, int sub, int subs,
                              Phase phase);
  // By value: callers pass keys of pending_ itself, which Resolve erases.
  absl::Status Resolve(PendingKey key);
  SampleBlocks& Blocks(std::map<RankState::Key, SampleBlocks>& store, int chunk, int mb, int subs);

  RankState& s_;
  // By (layer, micro-batch, sub-batch, phase).
  std::map<PendingKey, Pending> pending_;
  // Which layer's result a chunk's output waits for: (chunk, micro-batch, sub-batch, phase).
  std::map<std::tuple<int, int, int, int>, int> awaiting_;
  std::int64_t tick_ = 0;
};

}  // namespace testbed::exec
