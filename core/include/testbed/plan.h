// The training settings of a run and the parallel plan that planners produce. A plan is a
// list of pipeline stages; each stage has its own model chunks (layer ranges), tensor-parallel
// degree, data-parallel replicas (each a tensor-parallel group of devices with its own count of
// micro-batches) and device type. Per layer, a plan may set a tensor-parallel degree and a
// precision; per MoE layer, where each expert lives. The uniform TP x PP x DP grid of
// Megatron-LM is one way to fill it (GridPlan). A plan is plain data; schedulers turn it into
// a task graph.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/cluster.h"
#include "testbed/device_spec.h"
#include "testbed/metrics.h"

namespace testbed {

enum class RecomputeMode { kNone, kFull, kSelective };
[[nodiscard]] const char* RecomputeName(RecomputeMode mode) noexcept;

// The [train] section of an experiment.
struct TrainSettings {
  std::int64_t global_batch = 0;   // samples per iteration over all replicas (0: see below)
  std::int64_t micro_batch = 1;    // samples per micro-batch
  std::int64_t micro_batches = 0;  // per replica, used when global_batch is 0
  Precision precision = Precision::kFp16;  // kFp8: FP8 GEMMs, BF16 storage (StoragePrecision)
  int fp8_amax_history = 1024;     // kFp8: steps of amax history per FP8 tensor (fp32 each)
  std::string optimizer = "adam";  // "adam" (mixed precision: 16 B/param of state) | "sgd"
  std::int64_t steps = 1;          // iterations to simulate or train
  double learning_rate = 1e-3;
  bool optimizer_step = true;      // false: iterations end after the gradient exchange
};

// The [parallel] section: what the user asks for. Planners may choose other values (a
// searching partitioner ignores the degrees); the Plan records what was chosen.
struct ParallelSettings {
  int tp = 1;
  int pp = 1;
  int dp = 0;  // 0: devices / (tp * pp)
  int virtual_stages = 1;
  RecomputeMode recompute = RecomputeMode::kNone;
  bool sequence_parallel = false;
  int zero_stage = 0;
  int ep = 1;  // expert-parallel degree (MoE models)
  int cp = 1;  // context-parallel degree: each sequence split over this many replicas
  bool cp_ring = false;  // ring attention instead of all-gathered keys and values
};

// The layers [first_layer, end_layer) that a pipeline stage runs: the whole stage, or one
// model chunk of it with interleaving.
struct StageSpec {
  int first_layer = 0;  // index into ModelGraph::layers
  int end_layer = 0;    // one past the last
  // Layers of this chunk whose activations are recomputed in backward (the first ones of
  // the chunk): 0 = none, end_layer - first_layer = all (full recomputation).
  int recompute_layers = 0;
};

// Bits per element of one layer's weights, activations and gradients; 0 keeps the run's
// precision (TrainSettings::precision). 32 = fp32, 16 = the run's 16-bit format, 2 to 8 =
// integers of that width (fake-quantised in the executor). Compute runs at the activation
// width, on the narrowest units that hold it (PrecisionOfBits: 5-8 bits on int8, 2-4 on
// int4); stored activations, gradients and weights take their width in bits (packed).
// Whether `bits` is a width a layer may have: 0 (the run's precision), 2 to 8, 16 or 32.
[[nodiscard]] constexpr bool SupportedLayerBits(int bits) noexcept {
  return bits == 0 || (bits >= 2 && bits <= 8) || bits == 16 || bits == 32;
}

struct LayerPrecision {
  int weight_bits = 0;
  int activation_bits = 0;
  int gradient_bits = 0;
  friend bool operator==(const LayerPrecision&, const LayerPrecision&) = default;
};

// What planners set per layer (a tp_planner, a precision_policy).
struct LayerSetting {
  // Tensor-parallel degree of this layer; 0 = its stage's. It must divide the stage's degree:
  // a stage of T devices runs a layer of degree t as T / t groups of t devices, each on
  // t / T of the micro-batch (Oases: data parallelism = devices / TP).
  int tp = 0;
  LayerPrecision precision;
  friend bool operator==(const LayerSetting&, const LayerSetting&) = default;
};

// One data-parallel replica of a stage.
struct StageReplica {
  std::vector<DeviceId> devices;   // its tensor-parallel group, rank order (Stage::tp entries)
  std::int64_t micro_batches = 1;  // micro-batches it runs per iteration
  // Bytes each of its devices holds for the whole run besides the model's state and the
  // activations: buffers a refiner keeps there (a feature loader's rows beyond the batch's
  // own at their most). The simulator counts them in the device's static memory.
  double resident_bytes = 0;
};

// One pipeline stage: a position along the pipeline.
struct Stage {
  // Model chunks in chunk order: chunk c of stage s is global chunk c * pp + s (Megatron's
  // interleaved assignment); one entry without interleaving.
  std::vector<StageSpec> chunks;
  int tp = 1;
  std::vector<StageReplica> replicas;
  // Preset name every device of the stage must have (heterogeneous plans); "" = not checked.
  std::string device_type;

  [[nodiscard]] int dp() const noexcept { return static_cast<int>(replicas.size()); }
};

// The experts of one MoE layer: the expert-parallel rank owning each expert (it keeps the
// master weights and optimizer state) and the further ranks holding copies of it (Prophet's
// replicas, FasterMoE's shadows). A token for an expert goes to the copy on its own rank when
// there is one, else evenly over the expert's holders.
struct ExpertPlacement {
  std::vector<int> owner;                  // per expert
  std::vector<std::vector<int>> replicas;  // per expert: other ranks holding a copy (may be empty)
  friend bool operator==(const ExpertPlacement&, const ExpertPlacement&) = default;
};

// When the weights of an iteration's expert copies leave their owners.
enum class CopyTiming : std::uint8_t {
  // As soon as the previous iteration's optimizer step is done (the placement is known before
  // the iteration; the most overlap).
  kAfterStep,
  // Pro-Prophet's block-wise scheduler: a MoE layer's copies in two halves, the first when the
  // previous MoE layer's gates run, the second when its experts do (the first MoE layer of a
  // stage: after the step).
  kPreviousBlock,
  // When the layer is reached, after its gates (a decision made after the gate, FasterMoE's,
  // or the planner-only ablation without overlap).
  kAtLayer,
};

// Expert parallelism: the data-parallel replicas of a stage form groups of `degree`
// consecutive replicas; the MoE layers of the stage spread their experts over a group (rank k
// of the group is replica g * degree + k) and exchange tokens by all-to-all-v inside it.
struct ExpertParallelism {
  int degree = 1;
  // By MoE layer index; a layer without an entry puts expert e on rank e % degree.
  std::map<int, ExpertPlacement> placement;
  // Tokens an expert takes per rank and micro-batch: capacity_factor x (tokens x top_k /
  // experts); tokens beyond it are dropped. 0: dropless.
  double capacity_factor = 0.0;
  // When an iteration's expert copies are sent from their owners (CopyTiming).
  CopyTiming copy_timing = CopyTiming::kAfterStep;
  // The tokens' round trip through the experts in this many steps (FasterMoE's smart
  // schedule; it divides `degree`): the ranks form `exchange_steps` groups of consecutive
  // ranks, step j exchanges each rank's tokens with the ranks of group (its own + j) mod
  // exchange_steps, and the experts compute step j's tokens while step j + 1's move (the
  // exchanges then run on the expert stream). 1: one all-to-all each way.
  int exchange_steps = 1;
};

// Context parallelism (Megatron-Core's, as Llama 3 was trained): each sequence of a
// micro-batch split over `degree` consecutive replicas of every stage (a CP group), which run
// the same micro-batches in lock-step, each on 1/degree of every sequence's tokens. Attention
// is all-gather based: before each attention layer's forward (and its recomputation) every
// rank all-gathers the keys and values of the group's tokens over the ranks of its
// tensor-parallel index in the group, then computes its queries against all of them (the
// causal work load-balanced, 2 x degree chunks per sequence, so each rank does 1/degree of
// it); backward gathers them again and reduce-scatters their gradients. Or ring attention
// (`ring`): the attention layer runs in `degree` steps, each on one block of keys and values
// (1/degree of its work), while the block is passed on to the next rank of the group (a ring
// shift of one rank's block per step, degree - 1 of them, each overlapping a step's compute);
// backward passes the blocks with their gradients (twice the bytes) and returns the
// gradients home in a last shift. Gradients are synchronised over all replicas (data x
// context parallel), ZeRO shards over them too. With expert parallelism as well, both group
// consecutive replicas on their own (an expert-parallel group of 4 at CP 2 spans two CP
// groups, as Megatron-Core carves EP out of data x context parallel): a MoE layer's
// all-to-alls join its EP group, an attention layer's gathers its CP group, and the replicas
// of a block of lcm(degree, EP degree) run in lock-step.
struct ContextParallelism {
  int degree = 1;
  bool ring = false;
};

// Knobs a planner hands the scheduler. 0 / empty: the scheduler's own parameter holds.
struct SchedulerKnobs {
  int tp_chunks = 0;  // sub-batches per micro-batch for overlapping tensor-parallel collectives
};

// HSDP: under ZeRO-3, each layer's weights split into pieces routed over different link
// classes at once. A layer's share on class c is all-gathered before each use, and its
// gradient reduce-scattered, by a collective pinned to classes[c] (Task::links) on its own
// stream; sharding stays full (every device keeps 1/dp of every piece).
struct LinkClassSplit {
  std::vector<LinkKinds> classes;           // at most two (0: the cluster's own routes)
  std::vector<std::vector<double>> shares;  // [layer][class], each row sums to 1
  [[nodiscard]] bool empty() const noexcept { return classes.empty(); }
  friend bool operator==(const LinkClassSplit&, const LinkClassSplit&) = default;
};

struct Plan {
  std::vector<Stage> stages;  // pipeline order
  std::int64_t micro_batch = 1;  // samples per micro-batch
  RecomputeMode recompute = RecomputeMode::kNone;
  bool sequence_parallel = false;
  int zero_stage = 0;
  LinkClassSplit param_links;  // empty: one piece per layer on the cluster's own routes
  std::vector<LayerSetting> layers;  // empty, or one per model layer
  ExpertParallelism experts;
  ContextParallelism context;
  SchedulerKnobs knobs;
  // Iterations one pass over the training data takes (a feature loader knows it from the
  // graph's training vertices); 0: unknown. The simulator reports epoch_time_s when set.
  std::int64_t iterations_per_epoch = 0;
  // What the planner measured about itself (search time, candidates evaluated, ...), and
  // per-layer tables it made (a precision policy's widths and BitOPs); every backend reports
  // both with the run.
  MetricSet planner_metrics;
  std::vector<Table> planner_tables;

  [[nodiscard]] int pp() const noexcept { return static_cast<int>(stages.size()); }
  // Model chunks per stage (1 without interleaving).
  [[nodiscard]] int virtual_stages() const noexcept {
    return stages.empty() ? 1 : static_cast<int>(stages.front().chunks.size());
  }
  [[nodiscard]] int tp(int stage) const { return stages[static_cast<size_t>(stage)].tp; }
  // Replicas of a stage (data x context parallel).
  [[nodiscard]] int dp(int stage) const { return stages[static_cast<size_t>(stage)].dp(); }
  [[nodiscard]] int cp() const noexcept { return context.degree; }
  [[nodiscard]] const StageSpec& Chunk(int stage, int chunk) const {
    return stages[static_cast<size_t>(stage)].chunks[static_cast<size_t>(chunk)];
  }
  [[nodiscard]] StageSpec& MutableChunk(int stage, int chunk) {
    return stages[static_cast<size_t>(stage)].chunks[static_cast<size_t>(chunk)];
  }
  // Every chunk in global order (chunk c of stage s at c * pp + s).
  [[nodiscard]] std::vector<StageSpec> Chunks() const;
  // Replaces the chunks from a list in global order; the list has pp x virtual_stages entries.
  void SetChunks(const std::vector<StageSpec>& chunks);
  [[nodiscard]] DeviceId DeviceOf(int replica, int stage, int tp_rank) const {
    return stages[static_cast<size_t>(stage)].replicas[static_cast<size_t>(replica)].devices[static_cast<size_t>(tp_rank)];
  }
  [[nodiscard]] std::int64_t MicroBatches(int stage, int replica) const {
    return stages[static_cast<size_t>(stage)].replicas[static_cast<size_t>(replica)].micro_batches;
  }
  // Micro-batches per iteration over all replicas of a stage (the same for every stage); the
  // replicas of a context-parallel group share theirs, counted once.
  [[nodiscard]] std::int64_t TotalMicroBatches() const;
  [[nodiscard]] std::int64_t SamplesPerIteration() const { return TotalMicroBatches() * micro_batch; }
  // Devices the plan uses, ascending.
  [[nodiscard]] std::vector<DeviceId> Devices() const;
  [[nodiscard]] int num_devices() const;
  // The stage holding `layer` (-1 when none does).
  [[nodiscard]] int StageOfLayer(int layer) const;
  // Tensor-parallel degree and precision of a layer (its setting, else its stage's degree).
  [[nodiscard]] int LayerTp(int layer) const;
  [[nodiscard]] LayerPrecision LayerBits(int layer) const;
  // Expert placement of MoE layer `layer` over `experts` experts (the default when unset).
  [[nodiscard]] ExpertPlacement PlacementOf(int layer, std::int64_t experts) const;

  // The grid this plan is, when every stage has the same degree, replica count and
  // micro-batches per replica (the Megatron-LM layout); nullopt for heterogeneous plans.
  struct Grid {
    int tp = 1, pp = 1, dp = 1;
    std::int64_t micro_batches = 1;  // per replica
  };
  [[nodiscard]] std::optional<Grid> Uniform() const;

  // Checks the plan against a model of `num_layers` layers on `cluster`: stages cover the
  // layers in order without gaps (the same number of chunks each), every replica has `tp`
  // distinct devices of the cluster and of the stage's device type, no device is used twice,
  // every stage runs the same number of micro-batches per iteration, per-layer degrees divide
  // their stage's, expert placements name ranks of their group. The message names what is
  // wrong.
  [[nodiscard]] absl::Status Validate(int num_layers, const Cluster& cluster) const;
};

// Micro-batches per data-parallel replica: global_batch / (micro_batch x dp) when a global
// batch is given (it must divide evenly), else micro_batches (at least 1).
[[nodiscard]] absl::StatusOr<std::int64_t> MicroBatchesPerReplica(const TrainSettings& train, int dp);

// Megatron-LM's rank order: tensor-parallel ranks innermost (contiguous devices, so they
// share a node), then data-parallel replicas, pipeline stages outermost; device of
// (d, s, t) = (s * dp + d) * tp + t. Indexed [(d * pp + s) * tp + t].
[[nodiscard]] std::vector<DeviceId> DefaultDeviceMap(int tp, int pp, int dp);
// Splits `num_layers` layers into `parts` contiguous ranges as evenly as possible (the
// earlier ranges take the remainder).
[[nodiscard]] std::vector<StageSpec> UniformStages(int num_layers, int parts);

// The uniform grid, as a builder over the list of stages.
struct GridSpec {
  int tp = 1, pp = 1, dp = 1, virtual_stages = 1;
  std::int64_t micro_batch = 1;
  std::int64_t micro_batches = 1;  // per replica
  RecomputeMode recompute = RecomputeMode::kNone;
  bool sequence_parallel = false;
  int zero_stage = 0;
  std::vector<StageSpec> chunks;  // pp x virtual_stages entries in global chunk order
  // device_map[(d * pp + s) * tp + t]; empty: DefaultDeviceMap.
  std::vector<DeviceId> device_map;
};
[[nodiscard]] Plan GridPlan(const GridSpec& grid);

}  // namespace testbed
