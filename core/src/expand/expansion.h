// The state the passes of ExpandPipeline share while they build one schedule (DESIGN.md §4):
//   1. buckets      — the gradient buckets of every stage, known before compute so that the
//                     backward that makes a bucket's gradients final can end where it closes;
//   2. compute      — every replica walks its op sequence (the program once per iteration, or
//                     a program spanning iterations); each op emits its layers through the hook
//                     of their kind (layer_hooks.h), its receives and sends (p2p.h), its host
//                     copies and, at its step, the optimizer kernels;
//   3. p2p linking  — every receive meets its send;
//   4. gradient sync— per iteration, stage and shard: bucketed all-reduce (or reduce-scatter,
//                     or a compressor's exchange), tied-embedding all-reduce, expert gradients;
//   5. optimizer    — the step waits for its gradients; ZeRO-1/2 all-gather the new weights
//                     (ZeRO-3 gathers each layer before each use instead, param_gather.h);
//                     static memory per device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "testbed/pipeline_program.h"
#include "testbed/schedule.h"
#include "testbed/scheduler.h"

namespace testbed::expand {

class ParameterGathers;  // param_gather.h

// Tasks per lane: what the next task of a replica (per tensor-parallel rank) must wait for.
using Frontier = std::vector<std::vector<TaskId>>;

// One replica of a stage as the compute pass walks it.
struct Lane {
  int stage = 0;
  int replica = 0;
  int iteration = 0;
  int micro_batch = 0;  // within the iteration
  int chunk = 0;
  float fraction = 1.0f;  // of the micro-batch (slices)
  std::int64_t samples = 1;  // Plan::micro_batch
};

// A gradient bucket of one stage: layers in the order their gradients become final.
struct Bucket {
  std::vector<int> layers;
  bool compressed = false;  // one layer whose gradient goes through the compressor
};

class Expansion {
 public:
  Expansion(const SchedulingContext& ctx, const ExpandOptions& options);
  ~Expansion();
  Expansion(const Expansion&) = delete;
  Expansion& operator=(const Expansion&) = delete;

  // Every replica's op sequence over all iterations, from the programs for its count.
  [[nodiscard]] absl::Status PrepareOps(const ProgramSource& programs);

  // ---- shared by the passes ----
  const SchedulingContext& ctx;
  const ExpandOptions& opt;
  const Plan& plan;
  const ModelGraph& model;
  Schedule sched;
  int pp = 1, chunks = 1, iterations = 1;
  double elem = 2;  // bytes per element of the run's precision
  int weight_versions = 1;
  bool overlapping_iterations = false;  // a program spans iterations (no flush between them)
  bool p2p_by_direction = false;        // a program posts gradients' transfers apart (PipelineProgram)

  [[nodiscard]] const Stage& StageAt(int s) const { return plan.stages[static_cast<size_t>(s)]; }
  // Tensor-parallel degree of `layer` on stage `s` (its setting, else the stage's).
  [[nodiscard]] int LayerTpOn(int s, int layer) const {
    if (plan.layers.empty() || plan.layers[static_cast<size_t>(layer)].tp <= 0) return plan.tp(s);
    return plan.layers[static_cast<size_t>(layer)].tp;
  }
  [[nodiscard]] DeviceId Dev(int replica, int stage, int t) const { return plan.DeviceOf(replica, stage, t); }
  [[nodiscard]] const StepInput& Inputs(int iteration) const;
  // Bytes per gradient / weight element of a layer (its precision setting, else the run's).
  [[nodiscard]] double GradientElementBytes(int layer) const;
  [[nodiscard]] double WeightElementBytes(int layer) const;
  // Compute precision of a layer.
  [[nodiscard]] Precision LayerPrecisionOf(int layer) const;
  // Whether MoE layer `layer` runs with expert parallelism (its experts spread over ranks).
  [[nodiscard]] bool ExpertParallel(int layer) const;
  // Parameters of a layer whose gradients every data-parallel replica all-reduces, on one
  // tensor-parallel rank (expert weights under expert parallelism are exchanged apart).
  [[nodiscard]] double ReplicatedParams(int layer) const;
  // Parameters a device of (stage, replica) keeps with gradients and optimizer state, on one
  // tensor-parallel rank: its stage's share, less the experts another rank of its
  // expert-parallel group owns.
  [[nodiscard]] double OwnedParams(int stage, int replica) const;
  // Weights (and their gradients) of experts it holds copies of, without optimizer state.
  [[nodiscard]] double CopiedExpertParams(int stage, int replica) const;
  // Whether the gradient of `layer` goes through the run's compressor.
  [[nodiscard]] bool Compressed(int layer) const;
  // The tensor-parallel group of a replica (every rank), and of a sub-group of `degree`
  // consecutive ranks starting at rank `first` (per-layer degrees).
  std::int32_t TpGroup(int replica, int stage, int first = 0, int degree = 0);
  // Program op sequence of a replica over every iteration (optimizer steps included).
  [[nodiscard]] const std::vector<PipelineOp>& OpsOf(int stage, int replica) const;
  // Share of a micro-batch a replica runs: its program's slice, over the context-parallel
  // degree (each rank of a CP group takes 1/cp of every sequence).
  [[nodiscard]] double Fraction(int stage, int replica, int micro_batch) const;
  // The context-parallel group of tensor-parallel rank `t` of a replica: that rank of every
  // replica of the replica's CP group.
  std::int32_t CpGroup(int replica, int stage, int t);
  // Micro-batch `micro_batch` of a replica as counted over its stage's replicas in order,
  // and back: (replica, micro-batch within it) of stage `stage` running global one `g`.
  [[nodiscard]] std::int64_t GlobalMicroBatch(int stage, int replica, int micro_batch) const;
  [[nodiscard]] std::pair<int, int> Locate(int stage, std::int64_t g) const;

  // Gradient buckets per stage (pass 1), and the layers at which a final backward splits.
  std::vector<std::vector<Bucket>> buckets;
  std::vector<std::set<int>> bucket_ends;  // per stage: a bucket's gradients are final once this layer's are

  // Final backward task per (iteration, device, layer): the gradient of the layer on that
  // device is complete when it ends.
  void RecordFinalBackward(int iteration, DeviceId device, int layer, TaskId task);
  [[nodiscard]] TaskId FinalBackward(int iteration, DeviceId device, int layer) const;
  // Whether op index `k` of (stage, replica) is the last backward of its (iteration, chunk).
  [[nodiscard]] bool IsFinalBackward(int stage, int replica, size_t k) const;

  // Sparse embedding communication: the task after which a device's embedding gradient rows
  // exist, per (iteration, device), where it is not the layer's final backward (a split one).
  std::map<std::pair<int, DeviceId>, TaskId> embedding_backward;
  // ... and the parts of an iteration's first forward split by time (RangeRequest::time_parts),
  // per (iteration, device), in order.
  std::map<std::pair<int, DeviceId>, std::vector<TaskId>> forward_parts;
  // Optimizer kernels emitted by the compute pass per (iteration, device), and what they
  // wait for, filled in by the gradient-sync pass.
  std::map<std::pair<int, DeviceId>, TaskId> optimizer_task;
  std::map<std::pair<int, DeviceId>, std::vector<TaskId>> gradients_ready;
  // First compute task of each (iteration, device): waits for the previous iteration's
  // parameter all-gather under ZeRO.
  void RecordCompute(int iteration, DeviceId device, TaskId task) {
    TaskId& slot = first_compute_[static_cast<size_t>(iteration)][static_cast<size_t>(device)];
    if (slot < 0) slot = task;
  }
  [[nodiscard]] TaskId FirstCompute(int iteration, DeviceId device) const {
    if (iteration >= iterations) return -1;
    return first_compute_[static_cast<size_t>(iteration)][static_cast<size_t>(device)];
  }
  // First forward compute task per (iteration, device, layer); kept only when the weights
  // are gathered per bucket (ExpandOptions::param_gather_overlap under ZeRO-1/2), whose
  // gathers each layer's forward waits for.
  [[nodiscard]] bool TracksForwards() const { return !first_fwd_.empty(); }
  void RecordForward(int iteration, DeviceId device, int layer, TaskId task);
  [[nodiscard]] TaskId FirstForward(int iteration, DeviceId device, int layer) const;
  // Replica copying (replica_copy.h): the records of replica 0's devices `from` given to a
  // copy's, device d's to to[d], with task ids + `offset`.
  void CopyDeviceRecords(const std::vector<DeviceId>& from, const std::vector<DeviceId>& to, TaskId offset);
  // Work entries by what determines them, so that the thousands of tasks doing the same work
  // are interned without recomputing their memory figures.
  struct WorkKey {
    std::int32_t first, end, tp;
    std::int64_t micro_batch;
    float fraction;
    float time_share;
    std::uint8_t precision, part, selective;
    double expert_tokens;
    bool operator==(const WorkKey&) const = default;
  };
  struct WorkKeyHash {
    size_t operator()(const WorkKey& k) const noexcept;
  };
  absl::flat_hash_map<WorkKey, std::int32_t, WorkKeyHash> work_ids;
  // ZeRO: the all-gather of the weights after each (iteration, device)'s step.
  std::map<std::pair<int, DeviceId>, TaskId> parameters_gathered;
  // ... or, with param_gather_overlap, per (next iteration, device) the per-bucket gathers,
  // each with the layers it carries.
  std::map<std::pair<int, DeviceId>, std::vector<std::pair<std::vector<int>, TaskId>>> bucket_gathers;
  // ZeRO-3: each layer's weights all-gathered before each use (param_gather.h).
  std::unique_ptr<ParameterGathers> param_gathers;

  // Point-to-point: a receive and its send meet under (iteration, receiving global chunk,
  // receiving replica, tp rank, micro-batch, direction); the second to arrive links the pair.
  struct TransferKey {
    std::int32_t iteration, chunk, replica, tp_rank, micro_batch, backward;
    bool operator==(const TransferKey&) const = default;
  };
  struct TransferKeyHash {
    size_t operator()(const TransferKey& k) const noexcept;
  };
  // Registers one side; links the pair when the other side is already there.
  void MeetTransfer(const TransferKey& key, TaskId task, bool is_recv);
  // Transfers still waiting for their other side (an error once compute is done).
  absl::flat_hash_map<TransferKey, std::pair<TaskId, bool>, TransferKeyHash> unmatched;
  TaskId duplicate_transfer = -1;
  std::set<std::tuple<int, int, int, int, int>> pending_recompute;  // (iteration, stage, replica, chunk, mb)
  // Expert weights already broadcast to their copies: (iteration, layer, stage, expert-parallel group).
  std::set<std::tuple<int, int, int, int>> broadcast_done;
  // Per (iteration, stage, expert-parallel group): the gates and the expert tasks of the first
  // forward of the latest MoE layer expanded (Pro-Prophet's copies ride on them).
  std::map<std::tuple<int, int, int>, std::pair<std::vector<TaskId>, std::vector<TaskId>>> moe_block_marks;
  std::set<std::tuple<int, int, int, int>> moe_marked;  // (iteration, stage, group, layer) recorded

 private:
  std::vector<std::vector<std::vector<PipelineOp>>> ops_;        // [stage][replica]
  std::vector<std::vector<std::vector<char>>> final_backward_;   // [stage][replica][op index]
  std::vector<std::vector<std::vector<double>>> fractions_;      // [stage][replica][mb]
  std::vector<std::vector<std::int64_t>> offsets_;               // [stage][replica]: first global micro-batch
  std::vector<std::vector<int>> program_micro_batches_;          // [stage][replica]: micro-batch indices its program uses
  std::vector<std::vector<int>> local_layer_;  // [stage][layer] -> index among the stage's layers, -1
  std::vector<int> stage_of_device_;
  std::vector<std::vector<std::vector<TaskId>>> final_bwd_;      // [iteration][device][local layer]
  std::vector<std::vector<std::vector<TaskId>>> first_fwd_;      // [iteration][device][local layer], or empty
  std::vector<std::vector<TaskId>> first_compute_;               // [iteration][device]
  std::vector<std::vector<std::int32_t>> full_tp_group_;         // [stage][replica]: its whole TP group
  std::unordered_map<std::uint64_t, std::int32_t> sub_tp_group_; // (replica, stage, first, degree)
  std::unordered_map<std::uint64_t, std::int32_t> cp_group_;     // (lead replica, stage, tp rank)
};

// A task of `kind` on `stream` belonging to the lane's op (stage, chunk, replica, micro-batch,
// iteration, fraction filled in).
[[nodiscard]] Task LaneTask(const Lane& lane, TaskKind kind, std::uint8_t stream, Phase phase);
// A collective over `group` of layers [first, end) of stage `stage`.
[[nodiscard]] Task GroupTask(CollectiveOp op, std::uint8_t stream, std::int32_t group, int stage, int first, int end,
                             std::int64_t bytes, Phase phase = Phase::kBackward);

// The passes, each in its own file.
[[nodiscard]] absl::Status PlanBuckets(Expansion& e);
[[nodiscard]] absl::Status ComputePass(Expansion& e);
[[nodiscard]] absl::Status LinkTransfers(Expansion& e);
[[nodiscard]] absl::Status GradientSyncPass(Expansion& e);
// Part of pass 4 under ZeRO: the all-gather of the updated weights after iteration `it`'s step.
[[nodiscard]] absl::Status GatherParameters(Expansion& e, int it);
[[nodiscard]] absl::Status OptimizerPass(Expansion& e);

}  // namespace testbed::expand
