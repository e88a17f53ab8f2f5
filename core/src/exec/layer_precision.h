// The plan's per-layer precision (a precision_policy's choice, Plan::LayerBits) applied to the
// executor's model: each layer's matrix products fake-quantised at its widths.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "testbed/plan.h"
#include "testbed/train/quantize.h"
#include "testbed/train/sequential_model.h"

namespace testbed::exec {

// The engine's widths for one layer: a width of 0 (the run's precision) is 32, since the
// engine computes in fp32; 16 is bfloat16. Gradients use stochastic rounding, with random
// numbers fixed by `seed`, the layer and the rank.
[[nodiscard]] train::LayerQuant EngineQuant(const LayerPrecision& bits, std::uint64_t seed, int layer, int rank) noexcept;

// Sets every layer of `model` (layer i = ModelGraph layer i) to its plan widths.
[[nodiscard]] absl::Status ApplyLayerPrecision(const Plan& plan, std::uint64_t seed, int rank,
                                               train::SequentialModel<float>& model);

}  // namespace testbed::exec
