#include "stage_aware_recompute.h"

#include <algorithm>
#include <cmath>

namespace testbed::merak {

std::vector<double> StageAwareRatios(double r0, int pp) {
  std::vector<double> r(static_cast<size_t>(std::max(pp, 0)), 0.0);
  for (int k = 0; k < pp - 1; ++k) {
    const double rk = 1.0 - (1.0 - r0) * static_cast<double>(pp - 1) / static_cast<double>(pp - 1 - k);
    r[static_cast<size_t>(k)] = std::clamp(rk, 0.0, 1.0);
  }
  return r;
}

std::vector<double> UniformRatios(double r0, int pp) {
  return std::vector<double>(static_cast<size_t>(std::max(pp, 0)), std::clamp(r0, 0.0, 1.0));
}

void ShiftAdjust(std::vector<double>& ratios) {
  const size_t p = ratios.size();
  if (p > 2) ratios[p - 2] = ratios[p - 3];
}

int RecomputeLayers(double r, int n) noexcept {
  if (r <= 0 || n <= 0) return 0;
  // Tolerance so that r = k/n gives exactly k layers despite rounding.
  const int k = static_cast<int>(std::ceil(r * n - 1e-9));
  return std::clamp(k, 0, n);
}

void ApplyRatios(Plan& plan, const std::vector<double>& ratios) {
  bool any = false;
  for (int s = 0; s < plan.pp(); ++s) {
    for (int c = 0; c < plan.virtual_stages(); ++c) {
      StageSpec& st = plan.MutableChunk(s, c);
      st.recompute_layers = RecomputeLayers(ratios[static_cast<size_t>(s)], st.end_layer - st.first_layer);
      any = any || st.recompute_layers > 0;
    }
  }
  plan.recompute = any ? RecomputeMode::kFull : RecomputeMode::kNone;
}

}  // namespace testbed::merak
