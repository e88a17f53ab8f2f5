#include "testbed/memory_model.h"

#include <algorithm>

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
  const double elem = BytesPerElement(precision);
  const double shard = std::max(1, dp);
  StaticMemory m;
  m.weights = params * elem;
  m.gradients = params * elem;
  m.optimizer = params * (optimizer == "adam" ? 12.0 : 8.0);
  if (elem >= 4) m.optimizer -= params * 4.0;  // fp32 training needs no separate master copy
  if (zero_stage >= 1) m.optimizer /= shard;
  if (zero_stage >= 2) m.gradients /= shard;
  if (zero_stage >= 3) m.weights /= shard;
  return m;
}

double StageParams(const Plan& plan, const ModelGraph& model, int stage) noexcept {
  double params = 0;
  bool holds_embedding = false;
  for (int c = 0; c < plan.virtual_stages; ++c) {
    const StageSpec& st = plan.Chunk(stage, c);
    if (st.first_layer == 0) holds_embedding = true;
  }
  for (int c = 0; c < plan.virtual_stages; ++c) {
    const StageSpec& st = plan.Chunk(stage, c);
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      const Layer& layer = model.layers[static_cast<size_t>(l)];
      params += static_cast<double>(layer.params);
      if (layer.shared_params > 0 && !holds_embedding) params += static_cast<double>(layer.shared_params);
    }
  }
  return params / std::max(1, plan.tp);
}

}  // namespace testbed
