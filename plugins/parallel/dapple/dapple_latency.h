// DAPPLE's pipeline latency model (Fan et al., PPoPP 2021) as we read it: warm-up and ending
// through a pivot stage, the pivot's steady phase, and the gradient all-reduce left exposed.
#pragma once

#include <vector>

namespace testbed::dapple {

struct StageLoad {
  double f = 0, b = 0;  // forward, backward of one micro-batch
  double send = 0;      // transfer of its activation (and gradient back) to the next stage
  double allreduce = 0; // its gradient all-reduce over the data-parallel replicas
};

struct Latency {
  double seconds = 0;
  int pivot = 0;
};

// With M micro-batches the pivot Q is found from the last stage backwards: stage j takes over
// when (M-1)(F_j+B_j) exceeds (M-1)(F_Q+B_Q) plus the work and transfers between j and Q. Then
//   L = sum_{s<=Q}(F_s + B_s + 2 C_s) + (M-1)(F_Q + B_Q) + exposed all-reduce,
// with C_s the transfer out of stage s (none out of Q) and the all-reduce of stage s hidden
// behind the backwards still to run on the stages before it.
[[nodiscard]] Latency PipelineLatency(const std::vector<StageLoad>& stages, int micro_batches);

}  // namespace testbed::dapple
