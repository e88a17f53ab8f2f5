#include "cost_model.h"

#include <algorithm>

namespace testbed::prophet {

double AllToAllBandwidth(double bytes) noexcept {
  constexpr double kKiB = 1024, kGbps = 1e9 / 8;
  if (bytes <= 128 * kKiB) return 6 * kGbps;
  if (bytes <= 256 * kKiB) return 16 * kGbps;
  if (bytes <= 1024 * kKiB) return 42 * kGbps;
  return 100 * kGbps;
}

LayerCost Cost(const MoeLayerShape& shape, const CostConstants& k, const FlowState& flow) {
  const double token_bytes = static_cast<double>(shape.hidden) * k.data_bytes;
  const double flops = k.compute_tflops * 1e12;
  const auto& h = flow.computed();
  const auto& r = flow.received();
  LayerCost c;
  c.a2a_s = *std::max_element(r.begin(), r.end()) * token_bytes / AllToAllBandwidth(flow.MaxMessage() * token_bytes);
  c.fec_s = *std::max_element(h.begin(), h.end()) * shape.expert_flops_per_token / flops;
  c.fnec_s = shape.tokens_per_rank * shape.other_flops_per_token / flops;
  double copies = 0;
  for (int e = 0; e < flow.experts(); ++e) copies += static_cast<double>(flow.copies(e).size());
  const double expert_bytes = static_cast<double>(shape.expert_params) * k.data_bytes;
  c.trans_s = copies * expert_bytes / (static_cast<double>(flow.ranks()) * k.trans_gbps * 1e9 / 8);
  c.agg_s = c.trans_s;
  const double trans = k.scheduler ? std::max(0.0, c.trans_s - c.fec_s - c.fnec_s) : c.trans_s;
  const double agg = k.scheduler ? std::max(0.0, c.agg_s - 2 * c.fec_s - 2 * c.fnec_s) : c.agg_s;
  c.total_s = 4 * c.a2a_s + 3 * c.fec_s + trans + agg;
  return c;
}

}  // namespace testbed::prophet
