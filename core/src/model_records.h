// The layer records transformers are built from (testbed/model_graph.h): embedding,
// attention, MLP or MoE block halves and the output head, with their FLOPs, parameters,
// activation memory and tensor-parallel traffic. Shared by the decoder-only and encoder-only
// families (gpt, bert, moe-gpt) and the encoder-decoder Transformer (model_seq.h).
#pragma once

#include <cstdint>
#include <string>

#include "testbed/model_graph.h"

namespace testbed {

// The dimensions every record of a transformer shares.
struct TransformerDims {
  std::int64_t h = 0, s = 0, a = 0, v = 0, f = 0;
  std::int64_t kv = 0;    // key/value heads (grouped-query attention)
  bool causal = true;     // self-attention masked to the past (gpt); false: bert
  bool swiglu = false, flash = false, rope = false;
};
// From a shape whose checks have passed; f = 4h and kv = heads where the shape leaves them 0.
[[nodiscard]] TransformerDims DimsOf(const ModelShape& shape);

// A record with the shared dimensions set and fp16 hidden states (2·s·h bytes) handed on.
[[nodiscard]] Layer BaseRecord(const TransformerDims& d, std::string name, LayerKind kind, std::int64_t block);
// Token (and learned position) embedding.
[[nodiscard]] Layer EmbeddingRecord(const TransformerDims& d);
// An attention block half; `causal` as d's unless the layer says otherwise (a decoder's
// cross-attention is not causal).
[[nodiscard]] Layer AttentionRecord(const TransformerDims& d, std::string name, std::int64_t block, bool causal);
[[nodiscard]] Layer MlpRecord(const TransformerDims& d, std::string name, std::int64_t block);
[[nodiscard]] Layer MoeRecord(const TransformerDims& d, std::string name, std::int64_t block, std::int64_t experts,
                              std::int64_t top_k);
// Final LayerNorm, logits and cross-entropy; `mlm_transform` adds BERT's h x h transform.
[[nodiscard]] Layer HeadRecord(const TransformerDims& d, bool tied, bool mlm_transform);

}  // namespace testbed
