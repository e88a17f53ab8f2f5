// One rank of the executor: its setup (place in the plan, groups, model shard, optimizer)
// and its steps, each walking the rank's tasks in the schedule's execution order and handing
// each to the handler the dispatch table names for its (kind, operation, stream). A task no
// handler takes is an error naming it, never a silent success.
#pragma once

#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "exec/compute_tasks.h"
#include "exec/gradient_tasks.h"
#include "exec/rank_state.h"
#include "exec/transfer_tasks.h"

namespace testbed::exec {

class RankRunner {
 public:
  RankRunner(const ExecutorInputs& in, CommGroup& world);

  [[nodiscard]] absl::Status Setup();
  // One training step; `times` (when given) gets each task's start and end.
  [[nodiscard]] absl::StatusOr<StepRecord> Step(std::int64_t step, std::vector<TaskTime>* times);
  // A schedule whose iterations overlap (no flush: PipeDream-2BW) runs whole, every iteration
  // at once: a record per iteration, each with the mean wall time per iteration.
  [[nodiscard]] absl::StatusOr<std::vector<StepRecord>> RunWhole(std::vector<TaskTime>* times);
  // Loss and accuracy of the whole model on held-out data (rank 0, unsplit models only).
  [[nodiscard]] absl::Status Evaluate(ExecutionResult& out);
  // The last step's traffic and timing, summed over every rank.
  [[nodiscard]] const StepMetrics& totals() const noexcept { return totals_; }

 private:
  using Handler = std::function<absl::Status(TaskId, const Task&)>;
  // (kind, collective op, stream); the op is kAllReduce for kinds that have none.
  using DispatchKey = std::tuple<TaskKind, CollectiveOp, std::uint8_t>;
  void BuildDispatch();
  [[nodiscard]] const Handler* Find(const Task& t) const;
  // Every task of the schedule has a handler (an error naming the first that has none).
  [[nodiscard]] absl::Status CheckHandled() const;
  [[nodiscard]] absl::Status Run(TaskId id);
  // Every task of this rank in order, then what is still under way; the wall time.
  [[nodiscard]] absl::StatusOr<double> RunTasks(std::vector<TaskTime>* times);
  // Whether the schedule's iterations overlap, and what such a run needs.
  [[nodiscard]] absl::Status SetupOverlap();

  RankState s_;
  ComputeTasks compute_;
  TransferTasks transfers_;
  GradientTasks gradients_;
  std::map<DispatchKey, Handler> dispatch_;
  std::vector<TaskId> tasks_;
  StepMetrics totals_;
};

}  // namespace testbed::exec
