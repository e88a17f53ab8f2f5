// Pipeline schedules as programs: per pipeline stage, the order of forward, backward and
// recompute operations on (model chunk, micro-batch), and where the optimizer steps. Schedulers
// write programs (GPipe, 1F1B, interleaved 1F1B, PipeDream-2BW, Merak's shifted critical path,
// AutoPipe's sliced start-up); ExpandPipeline turns a program into the full task graph of a
// plan in passes (core/src/expand): compute with a hook per layer kind (tensor-parallel
// collectives and sub-batches, per-layer degrees and resharding, MoE gate / all-to-all-v /
// experts), stage-to-stage sends and receives, bucketed gradient synchronisation overlapping
// the backward pass, and the optimizer step, for every iteration of the run.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/param_set.h"
#include "testbed/param_spec.h"
#include "testbed/schedule.h"
#include "testbed/scheduler.h"

namespace testbed {

struct PipelineOp {
  enum class Kind : std::uint8_t { kForward, kBackward, kRecompute, kOptimizerStep };
  Kind kind = Kind::kForward;
  int chunk = 0;
  int micro_batch = 0;  // within its iteration
  // Forward only: whether this forward checkpoints the stage's recompute layers
  // (StageSpec::recompute_layers) and so needs a recompute before its backward; -1 follows
  // the plan (checkpoint whenever the stage recomputes).
  int checkpoint = -1;
  // Programs spanning iterations: the iteration this op belongs to (kOptimizerStep: whose
  // gradients it applies).
  int iteration = 0;
};

struct PipelineProgram {
  std::vector<std::vector<PipelineOp>> stages;  // one op list per pipeline stage
  // Share of Plan::micro_batch samples in each micro-batch; empty means 1 for each. A slicer
  // that splits the first micro-batch into halves lists [0.5, 0.5, 1, 1, ...].
  std::vector<double> micro_batch_fraction;
  // false: one iteration; the expansion runs it once per iteration, each ending in a flush
  // and the optimizer step. true: the program covers every iteration of the run and places the
  // optimizer steps itself (one kOptimizerStep per stage and iteration, after that
  // iteration's backwards): pipelines without a flush.
  bool spans_iterations = false;
  // Weight versions a stage keeps (PipeDream-2BW stashes 2): extra copies of the weights.
  int weight_versions = 1;
  // true: gradients travel between stages on streams of their own (pp-send-back,
  // pp-recv-back), so that the activations' and the gradients' transfers each keep their own
  // order, as when a step posts both directions' sends and receives together. A program whose
  // stages meet the two directions in different orders needs it (interleaved 1F1B in groups
  // other than the pipeline depth); false: one send and one receive stream per device.
  bool p2p_by_direction = false;

  [[nodiscard]] int NumMicroBatches() const;  // highest micro-batch index used + 1
  [[nodiscard]] double Fraction(int micro_batch) const {
    return micro_batch_fraction.empty() ? 1.0 : micro_batch_fraction[static_cast<size_t>(micro_batch)];
  }
};

// The program for replicas running `micro_batches` micro-batches per iteration: replica r of
// stage s runs row s of the program made for its count (per-replica counts may differ).
using ProgramSource = std::function<absl::StatusOr<PipelineProgram>(int micro_batches)>;

// How data-parallel replicas exchange an embedding table's gradient. kAllReduce: the whole
// table's gradient, dense, in the gradient buckets (Horovod, PyTorch DDP). kAllToAll: sparse
// embedding communication (EmbRace's sparsity-aware hybrid communication): the replicas of
// the stage holding the embedding own its rows in turn (row r: replica r mod dp, model
// parallel); each iteration a replica fetches the rows its batch names from their owners
// before its first forward and sends their gradients to the owners after its last backward,
// each an all-to-all-v on the sparse-comm stream sized by StepInput::embedding_rows, and the
// owners update their rows; the other layers' gradients are all-reduced as before.
enum class EmbeddingExchange : std::uint8_t { kAllReduce, kAllToAll };

struct ExpandOptions {
  // > 1: sub-pipelined tensor parallelism (Merak) / overlapped sub-batches (Oases): each
  // layer's compute runs in this many parts and the collective of one part overlaps the
  // compute of the next (tensor-parallel collectives go on their own stream).
  int tp_chunks = 1;
  // Tensor-parallel collectives on the tensor-comm stream (overlapping compute where the
  // dependencies allow) instead of blocking the compute stream as Megatron-LM does.
  bool tp_overlap = false;
  // Gradient buckets (bytes of gradients each), closed in the order gradients become final
  // (last layer first); a bucket closes once it reaches this size. With dp_overlap a bucket's
  // all-reduce starts as soon as the last micro-batch's backward of its layers is done (that
  // backward is split at bucket boundaries for it), else after the whole backward pass.
  std::int64_t dp_bucket_bytes = 25 * 1024 * 1024;
  bool dp_overlap = true;
  // ZeRO-1/2 (Megatron-Core's distributed optimizer): the updated weights are all-gathered per
  // gradient bucket, in forward order, on the data-parallel stream after the step, and each
  // layer's first forward of the next iteration waits only for its bucket's gather
  // (Megatron-Core's overlap_param_gather, which launches them from the next forward). These
  // gathers belong to the next iteration, so the last simulated iteration has none. false:
  // one all-gather of the stage's weights inside the step, which the next forward waits for.
  bool param_gather_overlap = false;
  bool optimizer_step = true;
  // When a checkpointed micro-batch's recomputation may start. false: as soon as the stage's
  // compute stream is free (an idealised runtime). true: only once its output gradient has
  // arrived, as in Megatron-LM and DeepSpeed, whose recomputation runs inside autograd's
  // backward after the blocking receive. An explicit kRecompute op never waits.
  bool recompute_after_gradient = false;
  // Whether recomputing a tensor-parallel layer repeats its forward all-reduce. true: as
  // Megatron-LM's checkpointing does. false: Oases' fine-grained recomputation, where the
  // forward keeps each layer's already-reduced output (the next layer's checkpointed input),
  // so the recomputation only rebuilds the layer's internals.
  bool recompute_collectives = true;
  // true: a checkpointed layer is recomputed just before its own backward (per sub-batch for
  // tensor-parallel layers), so its recomputation fills the wait for the previous layer's
  // backward all-reduce (Oases' cross-pass schedule) and only one layer's activations are
  // rebuilt at a time. false: the checkpointed layers of a chunk are recomputed together
  // before its backward.
  bool recompute_interleaved = false;
  // true: every sub-batch of a tensor-parallel layer waits for all of the previous layer's
  // collectives (Wang et al., ASPLOS 2023: a collective decomposed into chunks overlapped
  // with the GEMM that produces them, the next op starting once the whole result is
  // reduced). false: each sub-batch runs on through the layers (Merak, Oases).
  bool tp_chunk_join = false;
  // With tp_chunks > 1: each chunk of a tensor-parallel layer costs its share of the whole
  // layer's time and memory, not the time of the layer on a share of the samples (which pays
  // every kernel's fixed cost once per chunk). Transformer Engine's communication overlap
  // (userbuffers) chunks only the GEMM next to each collective, so chunking adds nothing.
  bool tp_chunk_time_share = false;
  EmbeddingExchange embedding_exchange = EmbeddingExchange::kAllReduce;
  // kAllToAll: the next iteration's rows that this iteration does not update are fetched as
  // soon as this iteration's lookups are done, so that only the updated rows wait for the
  // gradient exchange (EmbRace's relaxed embedding dependency).
  bool embedding_prefetch = false;
  // Every backward in two parts (LayerPart::kBackwardData, kBackwardWeights): the input
  // gradients of a chunk's layers first, down to its first layer, whose gradient then exists
  // before the other weights' (EmbRace's reordered backward, ZeroBubble's B and W), then the
  // weights' gradients, last layer first.
  bool split_backward = false;
  // kAllToAll with embedding_prefetch: the rows an update changed are fetched in this many
  // parts, ordered by the time step that first needs them, and where the embedding feeds a
  // one-directional recurrent layer (an LSTM) the first forward of an iteration runs in as many
  // parts of its time steps, each waiting only for its rows (EmbRace's per-row priority queue,
  // at this granularity; recurrent layers proceed step by step, so their first steps need only
  // the first steps' rows). 1: one part.
  int embedding_priority_parts = 1;
  // Task::priority of the communication on each stream (all 0: every transfer shares links
  // evenly); a send's receive takes its send's.
  std::array<std::uint8_t, streams::kCount> stream_priority{};
};

// The parameters every pipeline scheduler takes for its expansion (tp_chunks, tp_overlap,
// dp_bucket_mib, dp_overlap, param_gather_overlap, recompute_after_gradient,
// recompute_collectives, recompute_interleaved, tp_chunk_join, tp_chunk_time_share), declared
// once, and their reading.
[[nodiscard]] std::vector<ParamSpec> ExpandOptionParams();
[[nodiscard]] absl::StatusOr<ExpandOptions> ExpandOptionsFrom(const ParamSet& params);

// GPipe: all forwards, then all backwards (last micro-batch first).
[[nodiscard]] PipelineProgram GPipeProgram(int pp, int micro_batches);
// 1F1B (PipeDream-Flush, Megatron-LM's default): stage s runs min(pp - s - 1, m) warm-up
// forwards, then alternates one forward and one backward, then drains the backwards.
[[nodiscard]] PipelineProgram OneFOneBProgram(int pp, int micro_batches);
// Megatron-LM's interleaved 1F1B over `chunks` model chunks per stage, in Megatron-Core's
// schedule table: micro-batches in groups of `group` (pp to micro_batches of them; the last
// group, what is left, none or at least pp), each group's chunk 0, then its chunk 1, ...;
// stage s warms up with (pp - s - 1) x 2 + (chunks - 1) x group forwards. 0: pp, or where the
// count is not a multiple of pp the smallest group accepted, so any count of at least pp
// runs. Groups other than pp post the gradients' transfers apart (p2p_by_direction).
[[nodiscard]] absl::StatusOr<PipelineProgram> InterleavedProgram(int pp, int chunks, int micro_batches, int group = 0);
// PipeDream-2BW (Narayanan et al. 2021): 1F1B over all `iterations` x `micro_batches`
// micro-batches with no flush between iterations (warm-up once, drain once); the gradients of
// an iteration's micro-batches are coalesced into one update, applied one iteration late
// (W(t+1) = W(t) - lr * grad(W(t-1))): the optimizer step of iteration i runs after the last
// backward of iteration i + 1 (the last iteration's at the end), so its gradient exchange has
// a whole iteration to finish. Two weight versions are stashed. With `deferred_update` false,
// a stage instead steps right after its last backward of the iteration (as PipeDream-2BW's
// runtime does, its gradient all-reduce then blocking the stage); the forwards of the next
// iteration still to come then run on the new weights, so versions no longer follow
// iterations (the simulator times it; the executor's versions follow iterations and refuse it).
[[nodiscard]] PipelineProgram PipeDream2BWProgram(int pp, int micro_batches, int iterations, bool deferred_update = true);

// Every (chunk, micro-batch) of every stage has exactly one forward and one backward,
// forward first, at most one recompute between them; the stage count matches. A program
// spanning iterations has this for each of `iterations` iterations and one optimizer step per
// iteration, after that iteration's backwards.
[[nodiscard]] absl::Status CheckProgram(const PipelineProgram& program, int pp, int chunks, int micro_batches,
                                        int iterations = 1);

// The full task graph: `program` for every replica (each must run its micro-batch count).
[[nodiscard]] absl::StatusOr<Schedule> ExpandPipeline(const SchedulingContext& ctx, const PipelineProgram& program,
                                                      const ExpandOptions& options);
// The full task graph with a program per replica micro-batch count.
[[nodiscard]] absl::StatusOr<Schedule> ExpandPipeline(const SchedulingContext& ctx, const ProgramSource& programs,
                                                      const ExpandOptions& options);

// The schedules several schedulers share, with their refusals naming `scheduler`: 1F1B for
// every replica's micro-batch count (one model chunk per stage), and PipeDream-2BW over
// ctx.iterations (at least as many micro-batches per iteration as stages, m >= depth).
[[nodiscard]] absl::StatusOr<Schedule> ExpandOneFOneB(const SchedulingContext& ctx, const ExpandOptions& options,
                                                      std::string_view scheduler);
[[nodiscard]] absl::StatusOr<Schedule> ExpandPipeDream2BW(const SchedulingContext& ctx, const ExpandOptions& options,
                                                          bool deferred_update, std::string_view scheduler);

}  // namespace testbed
