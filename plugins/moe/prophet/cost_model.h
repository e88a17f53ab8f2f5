// The planners' cost model of one MoE layer (Pro-Prophet, PAPERS.md), with the constants of
// the public implementation as defaults. With D ranks, H_i the tokens rank i's experts
// compute and R_i the tokens it receives from other ranks:
//   T_A2A  = max_i R_i x token_bytes / B_a2a, B_a2a chosen by the largest message one rank
//            sends another (<= 128 KiB: 6 Gb/s, <= 256 KiB: 16, <= 1 MiB: 42, above: 100);
//   T_FEC  = max_i H_i x expert FLOPs per token / F, T_BEC = 2 T_FEC;
//   T_FNEC = the block's other forward FLOPs of one rank's tokens / F, T_BNEC = 2 T_FNEC;
//   T_Trans = (copies over all experts) x expert bytes / (D x B_trans), T_Agg likewise for
//            the gradients;
//   T = 4 T_A2A + 3 T_FEC + T_Trans + T_Agg, and with the block-wise scheduler the transfers
//   count only beyond what they hide behind: max(0, T_Trans - T_FEC - T_FNEC) and
//   max(0, T_Agg - T_BEC - T_BNEC).
// The simulator does not use this model: it times the chosen placement with its own.
#pragma once

#include "flow_state.h"
#include "testbed/load_balancer.h"

namespace testbed::prophet {

struct CostConstants {
  double trans_gbps = 15;      // expert parameter and gradient transfers
  double compute_tflops = 35.7;
  double data_bytes = 4;       // fp32 activations, weights and gradients
  bool scheduler = true;       // the block-wise scheduler hides Trans and Agg behind compute
};

struct LayerCost {
  double a2a_s = 0, fec_s = 0, fnec_s = 0, trans_s = 0, agg_s = 0;
  double total_s = 0;  // with the exposed parts of Trans and Agg when the scheduler is on
};

// Bandwidth in bytes/s of an all-to-all whose largest message is `bytes`.
[[nodiscard]] double AllToAllBandwidth(double bytes) noexcept;
[[nodiscard]] LayerCost Cost(const MoeLayerShape& shape, const CostConstants& k, const FlowState& flow);

}  // namespace testbed::prophet
