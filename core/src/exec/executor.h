// The executor: runs a Schedule on real ranks (threads with the `local` communicator, MPI
// processes, GPUs with NCCL) with the training engine, so that every schedule the simulator
// times is also run for real: gradients equal single-process training, and measured task
// times can be held against the simulator's.
//
// Each rank walks its own tasks in the schedule's execution order, each through the handler
// of its (kind, operation, stream) (rank_runner.h; a task no handler takes is an error):
// compute tasks run the model's layers for a micro-batch or a sub-batch of it (forward,
// backward, or the recompute of a checkpointed forward), receives and sends move activations
// and gradients between stages, tensor-parallel all-reduces reduce a split layer's partial
// result asynchronously (so the next sub-batch's compute overlaps them), data-parallel
// collectives all-reduce (or compress) the gradients of their layers, kernel tasks step the
// optimizer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "testbed/communicator.h"
#include "testbed/compressor.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"
#include "testbed/schedule.h"
#include "testbed/train/delayed_gradients.h"
#include "testbed/train/gemm.h"
#include "testbed/train/loss.h"

namespace testbed::exec {

// A batch of training data: `rows_per_sample` consecutive rows of `inputs` per sample (a
// sequence of token ids as a column, or one row of features), one target per row.
struct Batch {
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> inputs;
  std::vector<std::int64_t> targets;
  std::int64_t rows_per_sample = 1;
};
// The global batch of step `step` with `samples` samples: the same on every rank.
using BatchSource = std::function<absl::StatusOr<Batch>(std::int64_t step, std::int64_t samples)>;

struct ExecutorInputs {
  const ModelGraph& model;
  const Plan& plan;
  const Schedule& schedule;
  const TrainSettings& train;
  BatchSource data{};
  std::uint64_t seed = 1;  // model initialisation
  // Makes one compressor instance (one per rank and parameter tensor); empty: plain all-reduce.
  std::function<absl::StatusOr<std::shared_ptr<Compressor>>()> make_compressor{};
  // Which layers' gradients go through the compressor (empty: all); the others are summed
  // by a plain all-reduce.
  std::function<bool(int layer)> compress_layer{};
  // Held-out data, evaluated by world rank 0 after training when the model is not split
  // (tp = pp = 1); empty: no evaluation.
  std::function<absl::StatusOr<Batch>()> validation{};
  // Makes the matrix-product backend of a world rank's thread (cuBLAS on that rank's GPU, say);
  // empty: Eigen on the CPU.
  std::function<absl::StatusOr<std::unique_ptr<train::GemmBackend>>(int world_rank)> make_gemm{};
  // Polled by every rank at the start of each step; once one rank sees true, every rank
  // finishes the step under way and stops before the next, and Execute returns Cancelled.
  // Only for ranks that are threads of this process (they share what it answers); empty:
  // never cancelled.
  std::function<bool()> cancelled{};
  // The classifier's loss (gpt models: cross-entropy whatever is set).
  train::LossKind loss = train::LossKind::kCrossEntropy;
  // SGD's heavy-ball momentum (the optimizer "sgd" only).
  double sgd_momentum = 0.9;
  // L2 regularisation: weight_decay * w is added to each gradient before it is (possibly)
  // delayed and applied, so that a delayed update is the regularised objective's gradient at
  // the stale weights.
  double weight_decay = 0;
  // Delayed SGD: each update applies the gradient of tau_t steps earlier (max_delay 0: none).
  train::DelayOptions delay{};
  // The training data, whole, evaluated like `validation` after training (the generalisation
  // gap is the difference); empty: not evaluated.
  std::function<absl::StatusOr<Batch>()> training_set{};
};

struct StepRecord {
  double loss = 0;       // mean cross-entropy per token over the global batch
  double grad_norm = 0;  // L2 norm of the full-model gradient before the update
  double wall_s = 0;     // slowest rank's time for the step
  // Delayed SGD: how many steps stale the gradient this step applied was (-1: none applied,
  // the first steps of a delayed run; 0 without a delay).
  int applied_delay = 0;
};

struct TaskTime {
  TaskId task = 0;
  DeviceId device = 0;
  double start_s = 0;  // from the start of the step
  double end_s = 0;
};

struct ExecutionResult {
  std::vector<StepRecord> steps;
  std::vector<TaskTime> last_step_tasks;  // every task of every rank hosted here, last step
  double pipeline_bytes_per_step = 0;     // stage-to-stage sends, all ranks
  double data_parallel_bytes_per_step = 0;  // gradient exchange on the wire, all ranks
  double tensor_parallel_bytes_per_step = 0;
  // Tensor-parallel all-reduces that ran while the rank computed something else (all ranks).
  double tensor_parallel_overlapped_per_step = 0;
  double encode_s_per_step = 0;  // compressor encode time, mean over ranks
  double compressed_dense_bytes_per_step = 0;  // the compressed tensors' float32 size, all ranks
  double compressed_wire_bytes_per_step = 0;   // what their payloads put on the wire, all ranks
  double decode_s_per_step = 0;
  // PipeDream-2BW (iterations overlapping): the second weight version a stage stashes and the
  // gradients of an iteration kept apart from the next's, as allocated, at their most on the
  // rank holding the most (bytes; 0 for flushed schedules).
  double weight_stash_bytes = 0;
  double held_gradient_bytes = 0;
  double weight_bytes = 0;  // the weights a rank holds (the most of any rank)
  double validation_loss = -1;   // when evaluated
  double validation_accuracy = -1;
  double train_set_loss = -1;  // with training_set
  double train_set_accuracy = -1;
};

// Runs `train.steps` iterations: the schedule's one iteration once per step, or, when its
// iterations overlap (Schedule::overlapping_iterations: PipeDream-2BW), the whole schedule,
// each compute task on its iteration's weight version and data. `endpoints` are the world-group endpoints this process
// hosts (all ranks for `local`, one for `mpi`); rank r is device r of the plan. The result
// is complete on the process hosting world rank 0 (others return their share). Endpoints
// must take host memory (memory_space() kHost): the nccl communicator with host_buffers.
// Errors: a rank's first failure (shape, communication deadline, ...) naming the task.
[[nodiscard]] absl::StatusOr<ExecutionResult> Execute(const ExecutorInputs& inputs,
                                                      std::vector<std::unique_ptr<CommGroup>> endpoints);

}  // namespace testbed::exec
