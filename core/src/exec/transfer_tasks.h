// Stage-to-stage traffic of the executor: a send posts the whole activation (forward) or
// input gradient (backward) of its chunk and micro-batch without waiting; a receive waits and
// leaves the tensor for the next compute task. Each direction travels on a group of its own
// (and, with interleaved stages, the traffic wrapping from the last stage to the first on two
// more), so that under NCCL's rules (one stream per communicator, a send waits for its
// receive) no wait leads back.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "exec/compute_tasks.h"
#include "exec/rank_state.h"

namespace testbed::exec {

class TransferTasks {
 public:
  TransferTasks(RankState& s, ComputeTasks& compute) : s_(s), compute_(compute) {}

  // The direction groups (every rank joins, in the same order).
  [[nodiscard]] absl::Status Setup();
  [[nodiscard]] absl::Status Send(const Task& t);
  [[nodiscard]] absl::Status Recv(const Task& t);
  // Waits for every send posted this step.
  [[nodiscard]] absl::Status Finish();

 private:
  [[nodiscard]] int Tag(int receiver_chunk, int mb, bool backward) const;
  [[nodiscard]] CommGroup& Direction(bool backward, bool wraps) const;

  RankState& s_;
  ComputeTasks& compute_;
  std::vector<std::pair<CommRequestPtr, std::unique_ptr<Tensor>>> pending_sends_;
};

}  // namespace testbed::exec
