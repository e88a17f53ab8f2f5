#include "shadow_policy.h"

#include <algorithm>
#include <numeric>

namespace testbed::fastermoe {

ShadowDecision DecideShadows(const Routing& routing, const ShadowConstants& k) {
  std::vector<double> total(static_cast<size_t>(routing.experts), 0.0);
  for (int r = 0; r < routing.ranks; ++r) {
    for (int e = 0; e < routing.experts; ++e) total[static_cast<size_t>(e)] += routing.At(r, e);
  }
  std::vector<int> order(total.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return total[static_cast<size_t>(a)] > total[static_cast<size_t>(b)]; });
  const double bw = k.net_gbps * 1e9 / 8;
  const double alpha_h2 = k.alpha * k.d_model * k.d_model;
  const double send_feature = k.d_model * k.data_bytes / bw;
  const double send_model = 2 * alpha_h2 * k.data_bytes / bw;
  const double compute = 4 * alpha_h2 / (k.gemm_tflops * 1e12);
  ShadowDecision d;
  d.shadowed.assign(total.size(), false);
  if (order.empty()) return d;
  auto latency = [&](double tokens) { return 3 * compute * tokens + 4 * send_feature * tokens; };
  double best = latency(total[static_cast<size_t>(order[0])]);
  d.latency_none_s = best;
  double shadow_time = 0;
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    shadow_time += send_model;
    const double next = latency(total[static_cast<size_t>(order[i + 1])]) + shadow_time;
    if (!(next < best)) break;
    best = next;
    d.shadowed[static_cast<size_t>(order[i])] = true;
  }
  d.latency_s = best;
  return d;
}

}  // namespace testbed::fastermoe
