// The training settings of a run and the parallel plan that planners produce: degrees,
// micro-batching, pipeline stages (as layer ranges), recomputation and the device mapping.
// A plan is plain data; schedulers turn it into a task graph.
#pragma once

#include <cstdint>
#include <map>
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
  Precision precision = Precision::kFp16;
  std::string optimizer = "adam";  // "adam" (mixed precision: 16 B/param of state) | "sgd"
  std::int64_t steps = 1;          // iterations to simulate or train
  double learning_rate = 1e-3;
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
};

// One pipeline stage (or one model chunk of a stage when virtual_stages > 1).
struct StageSpec {
  int first_layer = 0;  // index into ModelGraph::layers
  int end_layer = 0;    // one past the last
  // Layers of this stage whose activations are recomputed in backward (the first ones of
  // the stage): 0 = none, end_layer - first_layer = all (full recomputation).
  int recompute_layers = 0;
};

struct Plan {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int virtual_stages = 1;
  std::int64_t micro_batch = 1;
  std::int64_t micro_batches = 1;  // per data-parallel replica per iteration
  RecomputeMode recompute = RecomputeMode::kNone;
  bool sequence_parallel = false;
  int zero_stage = 0;
  // pp * virtual_stages entries in model order; chunk c of pipeline stage s is
  // stages[c * pp + s] (Megatron's interleaved assignment).
  std::vector<StageSpec> stages;
  // Tensor-parallel degree per layer when a tp_planner chose them; empty: `tp` everywhere.
  std::vector<int> layer_tp;
  // device_map[(d * pp + s) * tp + t] is the device of data-parallel rank d, stage s,
  // tensor-parallel rank t.
  std::vector<DeviceId> device_map;
  // Knobs a planner passes to the scheduler (e.g. "tp_chunks" for sub-pipelined TMP).
  std::map<std::string, double> hints;
  // What the planner measured about itself (search time, candidates evaluated, ...).
  MetricSet planner_metrics;

  [[nodiscard]] DeviceId DeviceOf(int dp_rank, int stage, int tp_rank) const {
    return device_map[static_cast<size_t>((dp_rank * pp + stage) * tp + tp_rank)];
  }
  [[nodiscard]] int num_devices() const noexcept { return tp * pp * dp; }
  [[nodiscard]] const StageSpec& Chunk(int stage, int chunk) const {
    return stages[static_cast<size_t>(chunk * pp + stage)];
  }
  // Checks internal consistency against a model of `num_layers` layers on `cluster`:
  // stages cover the layers in order without gaps, the device map is a permutation of
  // distinct devices, degrees are positive. The message names what is wrong.
  [[nodiscard]] absl::Status Validate(int num_layers, const Cluster& cluster) const;
};

// Micro-batches per data-parallel replica: global_batch / (micro_batch x dp) when a global
// batch is given (it must divide evenly), else micro_batches (at least 1).
[[nodiscard]] absl::StatusOr<std::int64_t> MicroBatchesPerReplica(const TrainSettings& train, int dp);

// Megatron-LM's rank order: tensor-parallel ranks innermost (contiguous devices, so they
// share a node), then data-parallel replicas, pipeline stages outermost; device of
// (d, s, t) = (s * dp + d) * tp + t.
[[nodiscard]] std::vector<DeviceId> DefaultDeviceMap(int tp, int pp, int dp);
// Splits `num_layers` layers into `parts` contiguous ranges as evenly as possible (the
// earlier ranges take the remainder).
[[nodiscard]] std::vector<StageSpec> UniformStages(int num_layers, int parts);

}  // namespace testbed
