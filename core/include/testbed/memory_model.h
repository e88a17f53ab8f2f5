// Device memory of training (Korthikanti et al. 2022 for activations; mixed-precision Adam
// and ZeRO for the rest): what a layer keeps for backward under tensor/sequence parallelism
// and recomputation, and the static bytes of weights, gradients and optimizer state.
// Shared by the simulator, which tracks memory over time, and by planners that check fit.
#pragma once

#include <cstdint>
#include <string>

#include "testbed/device_spec.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"

namespace testbed {

// Activations layer `l` keeps for backward for `samples` sequences on one tensor-parallel
// rank: the replicated part is split only under sequence parallelism; selective
// recomputation drops the attention-score part.
[[nodiscard]] double ActivationBytes(const Layer& l, double samples, int tp, bool sequence_parallel,
                                     bool selective) noexcept;
// What a checkpointed (fully recomputed) layer keeps: its input.
[[nodiscard]] double CheckpointBytes(const Layer& l, double samples, int tp, bool sequence_parallel) noexcept;

struct StaticMemory {
  double weights = 0;    // working-precision weights
  double gradients = 0;  // working-precision gradients
  double optimizer = 0;  // fp32 master weights and optimizer moments
  double fp8_weights = 0;  // FP8 training: each weight's FP8 copy and its transpose
  [[nodiscard]] double total() const noexcept { return weights + gradients + optimizer + fp8_weights; }
};
// Static bytes of `params` parameters held by one rank: mixed-precision Adam keeps 2 + 2 +
// 12 bytes per parameter (SGD with momentum 2 + 2 + 8); ZeRO stage 1 shards the optimizer
// state over `dp`, stage 2 also the gradients, stage 3 also the weights. FP8 training keeps
// BF16 weights and gradients (StoragePrecision) and, per parameter, an FP8 copy and its
// transpose (2 bytes, sharded with the weights); every parameter is counted, including the
// few (embedding, norms, the output layer) Transformer Engine leaves in BF16.
[[nodiscard]] StaticMemory StaticBytes(double params, Precision precision, const std::string& optimizer,
                                       int zero_stage, int dp) noexcept;

// FP8 training's scaling state of one layer (Transformer Engine's delayed scaling): per FP8
// linear layer (Fp8LinearLayers), three tensors (input, weight, output gradient), each with
// an fp32 amax history of `amax_history` steps, a scale and its inverse.
[[nodiscard]] double Fp8ScalingBytes(const Layer& l, int amax_history) noexcept;

// Parameters held by pipeline stage `stage` of `plan` on one tensor-parallel rank (a copy of
// shared weights where the stage holds a layer using them but not their owner).
[[nodiscard]] double StageParams(const Plan& plan, const ModelGraph& model, int stage) noexcept;

}  // namespace testbed
