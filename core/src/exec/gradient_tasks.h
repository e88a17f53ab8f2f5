// The executor's data-parallel side: a bucket's gradient all-reduce over its group (the
// plain gradients in one buffer; each compressed tensor through its compressor, mergeable
// payloads by all-reduce, others by all-gather), and the optimizer step with the step's
// gradient norm.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/rank_state.h"
#include "testbed/compressor.h"

namespace testbed::exec {

class GradientTasks {
 public:
  explicit GradientTasks(RankState& s) : s_(s) {}

  // The gradients of the task's layers held here, summed over the task's group.
  [[nodiscard]] absl::Status Exchange(const Task& t);
  // The update with the gradients of `iteration`.
  [[nodiscard]] absl::Status OptimizerStep(int iteration);
  // ZeRO: the task's layers' gradients reduce-scattered into this rank's parts; the weights of
  // one layer (ZeRO-3, before a use) or of all (ZeRO-1/2, after the step) gathered from them.
  [[nodiscard]] absl::Status ReduceScatter(const Task& t);
  [[nodiscard]] absl::Status GatherLayer(const Task& t);
  [[nodiscard]] absl::Status GatherAll(const Task& t);

 private:
  absl::Status ExchangeHeld(const Task& t);
  absl::Status StepHeld(int iteration);
  absl::Status Compressed(CommGroup& group, const std::string& tensor, std::vector<float>& flat);

  RankState& s_;
  std::map<std::string, std::shared_ptr<Compressor>> compressors_;
};

}  // namespace testbed::exec
