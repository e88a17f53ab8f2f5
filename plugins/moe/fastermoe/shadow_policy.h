// FasterMoE's dynamic shadowing decision (PAPERS.md; the public implementation's global
// policy): sum each expert's tokens over all ranks and sort descending; per token
// send_feature = d x bytes / B_net, send_model = 2 alpha d^2 x bytes / B_net, compute =
// 4 alpha d^2 / F; the latency with the heaviest expert's B tokens is 3 compute B + 4
// send_feature B; shadowing the heaviest experts one by one (each broadcast to every rank)
// lowers the bottleneck to the next expert's tokens and adds one send_model, and the policy
// shadows while that latency falls.
#pragma once

#include <vector>

#include "testbed/step_inputs.h"

namespace testbed::fastermoe {

struct ShadowConstants {
  double net_gbps = 50;      // B_net (public implementation: 50 Gb/s)
  double gemm_tflops = 11.5; // F (11.5 TFLOP/s)
  double alpha = 2;          // FFN width / d_model
  double d_model = 2048;
  double data_bytes = 4;
};

struct ShadowDecision {
  std::vector<bool> shadowed;   // per expert
  double latency_s = 0;         // the model's latency of the chosen set
  double latency_none_s = 0;    // with nothing shadowed
};

[[nodiscard]] ShadowDecision DecideShadows(const Routing& routing, const ShadowConstants& k);

}  // namespace testbed::fastermoe
