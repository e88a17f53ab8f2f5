// The layer hooks' emitter (internal to the expansion): a pipeline op's layers cut into runs
// (LayerRun), and the Emitter whose hooks emit each run's tasks for the lanes walking the op.
// Its members are defined by responsibility: the shared task builders and resharding
// (layer_emitter.cc), dense and tensor-parallel runs (tp_hooks.cc), expert-parallel MoE
// layers (expert_hooks.cc) and context-parallel attention (context_hooks.cc); layer_hooks.cc
// cuts the runs and calls them (EmitRange).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "expand/layer_hooks.h"
#include "expand/moe_routing.h"

namespace testbed::expand {

enum class RunKind : std::uint8_t { kDense, kTensorParallel, kExpertParallel };

// Consecutive layers one hook emits together.
struct LayerRun {
  int first = 0, end = 0;
  int tp = 1;
  Precision precision = Precision::kFp16;
  std::int64_t micro_batch = 1;
  RunKind kind = RunKind::kDense;
};

// Every task id of a frontier, sorted and unique; those of ranks [first, first + degree).
[[nodiscard]] std::vector<TaskId> AllDeps(const Frontier& f);
[[nodiscard]] std::vector<TaskId> RankDeps(const Frontier& f, int first, int degree);
// Bytes a layer all-reduces per sample over its tensor-parallel group in `phase`.
[[nodiscard]] std::int64_t TpBytesPerSample(const Layer& l, Phase phase);
// Bytes of activations stored per element relative to the 16-bit figures of the model graph.
[[nodiscard]] double ActivationScale(const Expansion& e, int layer);
// An attention layer split over a context-parallel group.
[[nodiscard]] bool ContextParallelAttention(const Expansion& e, int layer);

class Emitter {
 public:
  Emitter(Expansion& e, const RangeRequest& req) : e_(e), req_(req) {}

  // The work entry of layers [first, end) of a run, interned.
  std::int32_t Work(const Lane& lane, const LayerRun& run, int first, int end, float fraction, LayerPart part,
                    double expert_tokens, float time_share = 1.0f);

  // The work of layers [first, end) of a run on `fraction` of its micro-batch: its activation
  // and checkpoint bytes by part (whole, gate, experts on `expert_tokens`, split backward).
  ComputeWork MakeWork(const Lane& lane, const LayerRun& run, int first, int end, float fraction, LayerPart part,
                       double expert_tokens) const;

  // One compute task on tensor-parallel ranks [first_rank, first_rank + degree) of the lane,
  // on sub-batch `sub` of `subs`.
  // `phase` overrides the request's (a recomputation interleaved with a backward).
  TaskId Compute(const Lane& lane, int first_rank, int degree, std::int32_t work_id, const std::vector<TaskId>& deps,
                 int sub = 0, int subs = 1, std::optional<Phase> phase = std::nullopt);

  // A backward task on ranks [first_rank, first_rank + degree) that makes `layer`'s gradients
  // final (the gradient-sync pass starts its buckets from these).
  void RecordBackward(const Lane& lane, int first_rank, int degree, int layer, TaskId id);

  // One collective of the lane over `group` on `stream` (its bytes, or an all-to-all-v's work).
  TaskId Collective(const Lane& lane, CollectiveOp op, std::int32_t group, std::uint8_t stream, int first, int end,
                    float fraction, std::int64_t bytes, std::span<const TaskId> deps, std::int32_t work = -1,
                    int sub = 0, int subs = 1, std::optional<Phase> phase = std::nullopt);

  // ---- dense and tensor-parallel runs (tp_hooks.cc) ----
  // A run without tensor-parallel traffic: one task (a gang over the run's TP ranks), cut at
  // each gradient bucket's boundary on a final backward, or per bucket of a gathered forward.
  absl::Status Dense(LaneState& ls, const LayerRun& run);

  // A run split over a tensor-parallel group: per layer (and sub-batch with tp_chunks) a task
  // and the all-reduce it needs, blocking or on the tensor-comm stream.
  absl::Status TensorParallel(LaneState& ls, const LayerRun& run);

  // ---- expert-parallel MoE layers (expert_hooks.cc) ----
  // A MoE layer over one expert-parallel group's lanes: each rank's gate, the dispatch
  // all-to-all-v from the iteration's routing, each rank's experts, the combine; forward, the
  // expert copies' broadcasts as Plan::experts.copy_timing says; backward, the same reversed.
  absl::Status ExpertParallel(std::vector<LaneState>& lanes, const LayerRun& run);

  // FasterMoE's smart schedule: step j moves the tokens between each rank and the ranks of
  // group (its own + j) mod `steps` (all-to-all-v on the expert stream, one after another),
  // each rank's experts compute step j's tokens as they arrive, and the outputs go back step
  // by step; returns the returning exchanges.
  std::vector<TaskId> SteppedRoundTrip(std::vector<LaneState>& lanes, const TokenExchange& x, const Layer& layer,
                                       double act_elem, std::int32_t group, const LayerRun& run, int steps,
                                       const std::vector<TaskId>& deps);

  // The first forward of a MoE layer in an iteration copies each replicated expert's weights
  // from its owner to the ranks holding copies (Prophet's Trans, FasterMoE's shadowing), in
  // as many equal parts as `after` lists, part p after the previous optimizer step and the
  // tasks in after[p].
  std::vector<TaskId> ExpertWeightsBroadcast(std::vector<LaneState>& lanes, int l,
                                             const std::vector<std::vector<TaskId>>& after);

  // ---- context-parallel attention (context_hooks.cc) ----
  // Context parallelism around attention layer `l` of a CP group's lanes: one collective per
  // tensor-parallel rank over that rank of every lane, after what each lane's rank waited for,
  // and the rank's next task waits for it. Before the layer (`gather`): the keys and values of
  // the group's tokens all-gathered (forward, recomputation, and backward again); after its
  // backward: their gradients reduce-scattered back to the ranks owning the tokens.
  void ContextExchange(std::vector<LaneState>& lanes, const LayerRun& run, bool gather);

  // Ring attention (ContextParallelism::ring) of attention run `run` over a CP group's lanes:
  // `degree` steps, each computing 1/degree of the layer on every lane; before step j >= 1, per
  // tensor-parallel rank, a ring shift passes every rank's current block of keys and values to
  // the next rank (the first once the layer's input is ready, each later one once the block
  // before it has arrived, so the shifts overlap the steps' compute). Backward shifts carry
  // the blocks with their gradients, and a last shift takes the gradients home.
  absl::Status RingAttention(std::vector<LaneState>& lanes, const LayerRun& run,
                             const std::function<absl::Status(std::vector<LaneState>&)>& emit_step);

  // Keys and values of the group's tokens of this micro-batch on one tensor-parallel rank (an
  // all-gather's whole buffer).
  [[nodiscard]] std::int64_t GroupKvBytes(const std::vector<LaneState>& lanes, const LayerRun& run) const;

  // Between runs of different tensor-parallel degrees: every device gets the samples its new
  // group works on (activations forward, their gradients backward) from a device that has
  // them, by one all-to-all-v over the replica's devices.
  void Reshard(LaneState& ls, int from_tp, int to_tp, int boundary_layer);

 private:
  Expansion& e_;
  const RangeRequest& req_;
};

}  // namespace testbed::expand
