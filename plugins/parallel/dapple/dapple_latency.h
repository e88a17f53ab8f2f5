// DAPPLE's pipeline latency model (Fan et al., PPoPP 2021, §4) as we read it: with M
// micro-batches, the pivot stage Q is found from the last stage backwards (stage j takes over
// when (M-1)(F_j+B_j) exceeds (M-1)(F_Q+B_Q) plus the warm-up and ending work between j and
// Q), and the latency is the warm-up up to Q, Q's steady phase and the ending back from Q:
//   L = sum_{s<=Q}(F_s + B_s + 2 C_s) + (M-1)(F_Q + B_Q) + exposed gradient all-reduce,
// with C_s the activation transfer out of stage s (none out of Q) and the all-reduce of stage s
// hidden behind the backwards still to run on the stages before it.
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

[[nodiscard]] Latency PipelineLatency(const std::vector<StageLoad>& stages, int micro_batches);

}  // namespace testbed::dapple
