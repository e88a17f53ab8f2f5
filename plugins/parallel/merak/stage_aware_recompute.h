// Merak's stage-aware recomputation: stage k < P-1 recomputes r_k = 1 - (1 - r0)(P-1)/(P-1-k)
// of its layers (at least 0), the last stage none: later stages hold fewer micro-batches in
// flight, so they spend their spare memory on speed.
#pragma once

#include <vector>

#include "testbed/plan.h"

namespace testbed::merak {

// r_k for k = 0..pp-1, per the formula above.
[[nodiscard]] std::vector<double> StageAwareRatios(double r0, int pp);
// The same ratio on every stage (the ablation of stage awareness); the last stage keeps it,
// and the shifted critical path schedule decides not to checkpoint there.
[[nodiscard]] std::vector<double> UniformRatios(double r0, int pp);
// Under the shifted critical path stage P-2 holds one more micro-batch than in 1F1B, so
// Merak gives it stage P-3's ratio (when P > 2).
void ShiftAdjust(std::vector<double>& ratios);

// Layers recomputed for ratio r of n layers: the smallest count whose share is at least r.
[[nodiscard]] int RecomputeLayers(double r, int n) noexcept;
// Writes StageSpec::recompute_layers from per-stage ratios and sets Plan::recompute to full
// when any stage recomputes, none otherwise.
void ApplyRatios(Plan& plan, const std::vector<double>& ratios);

}  // namespace testbed::merak
