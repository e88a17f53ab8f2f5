#include "testbed/memory_model.h"

#include <algorithm>

#include "testbed/layer_kernels.h"

namespace testbed {

double ActivationBytes(const Layer& l, double samples, int tp, bool sequence_parallel, bool selective) noexcept {
  const double t = std::max(1, tp);
  const double replicated = static_cast<double>(l.activation_replicated_bytes_per_sample);
  const double score = selective ? 0.0 : static_cast<double>(l.activation_score_bytes_per_sample);
  const double sharded = static_cast<double>(l.activation_bytes_per_sample - l.activation_replicated_bytes_per_sample -
                                             l.activation_score_bytes_per_sample);
  return samples * ((sequence_parallel ? replicated / t : replicated) + sharded / t + score / t);
}

double CheckpointBytes(const Layer& l, double samples, int tp, bool sequence_parallel) noexcept {
  const double input = 2.0 * static_cast<double>(l.seq_len) * static_cast<double>(l.hidden);
  return samples * (sequence_parallel ? input / std::max(1, tp) : input);
}

StaticMemory StaticBytes(double params, Precision precision, const std::string& optimizer, int zero_stage,
                         int dp) noexcept {
  const double elem = BytesPerElement(StoragePrecision(precision));
  const double shard = std::max(1, dp);
  StaticMemory m;
  m.weights = params * elem;
  m.gradients = params * elem;
  if (precision == Precision::kFp8) m.fp8_weights = params * 2.0;
  m.optimizer = params * (optimizer == "adam" ? 12.0 : 8.0);
  if (elem >= 4) m.optimizer -= params * 4.0;  // fp32 training needs no separate master copy
  if (zero_stage >= 1) m.optimizer /= shard;
  if (zero_stage >= 2) m.gradients /= shard;
  if (zero_stage >= 3) {
    m.weights /= shard;
    m.fp8_weights /= shard;
  }
  return m;
}

double Fp8ScalingBytes(const Layer& l, int amax_history) noexcept {
  constexpr double kTensors = 3, kFp32 = 4;
  return static_cast<double>(Fp8LinearLayers(l)) * kTensors * (static_cast<double>(std::max(1, amax_history)) + 2) * kFp32;
}

double StageParams(const Plan& plan, const ModelGraph& model, int stage) noexcept {
  const Stage& st = plan.stages[static_cast<size_t>(stage)];
  bool holds_embedding = false;
  for (const StageSpec& c : st.chunks) {
    if (c.first_layer == 0) holds_embedding = true;
  }
  if (plan.layers.empty()) {
    double params = 0;
    for (const StageSpec& c : st.chunks) {
      for (int l = c.first_layer; l < c.end_layer; ++l) {
        const Layer& layer = model.layers[static_cast<size_t>(l)];
        params += static_cast<double>(layer.params);
        if (layer.shared_params > 0 && !holds_embedding) params += static_cast<double>(layer.shared_params);
      }
    }
    return params / std::max(1, st.tp);
  }
  // Per-layer degrees: each layer's share on one device.
  double params = 0;
  for (const StageSpec& c : st.chunks) {
    for (int l = c.first_layer; l < c.end_layer; ++l) {
      const Layer& layer = model.layers[static_cast<size_t>(l)];
      double p = static_cast<double>(layer.params);
      if (layer.shared_params > 0 && !holds_embedding) p += static_cast<double>(layer.shared_params);
      params += p / std::max(1, plan.LayerTp(l));
    }
  }
  return params;
}

}  // namespace testbed
