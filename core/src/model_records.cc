#include "model_records.h"

namespace testbed {

TransformerDims DimsOf(const ModelShape& shape) {
  TransformerDims d;
  d.h = shape.hidden;
  d.s = shape.seq_len;
  d.a = shape.heads;
  d.v = shape.vocab;
  d.f = shape.ffn_hidden > 0 ? shape.ffn_hidden : 4 * shape.hidden;
  d.kv = shape.kv_heads > 0 ? shape.kv_heads : shape.heads;
  d.causal = shape.family != "bert";
  d.swiglu = shape.ffn == "swiglu";
  d.flash = shape.attention == "flash";
  d.rope = shape.positions == "rope";
  return d;
}

Layer BaseRecord(const TransformerDims& d, std::string name, LayerKind kind, std::int64_t block) {
  Layer l;
  l.name = std::move(name);
  l.kind = kind;
  l.block = block;
  l.hidden = d.h;
  l.ffn_hidden = d.f;
  l.heads = d.a;
  l.seq_len = d.s;
  l.vocab = d.v;
  l.kv_heads = d.kv;
  l.causal = d.causal;
  l.output_bytes_per_sample = 2 * d.s * d.h;  // fp16 hidden states handed to the next layer
  return l;
}

Layer EmbeddingRecord(const TransformerDims& d) {
  const std::int64_t h = d.h, s = d.s, v = d.v;
  // Token and position embeddings (lookups: no matrix FLOPs). Megatron's vocab-parallel
  // embedding all-reduces its output in forward; its input needs no gradient.
  Layer emb = BaseRecord(d, "embedding", LayerKind::kEmbedding, -1);
  emb.params = v * h + (d.rope ? 0 : s * h);  // rotary positions have no table
  emb.activation_bytes_per_sample = s * h;    // dropout mask, one byte per element
  emb.activation_replicated_bytes_per_sample = s * h;
  emb.tp_fwd_allreduce_bytes_per_sample = 2 * s * h;
  return emb;
}

Layer AttentionRecord(const TransformerDims& d, std::string name, std::int64_t block, bool causal) {
  const std::int64_t h = d.h, s = d.s, a = d.a;
  const double hd = static_cast<double>(h), sd = static_cast<double>(s);
  // Grouped-query attention: K and V have kv heads of h / a each, kv_h = h kv / a columns.
  const std::int64_t kv_h = h / a * d.kv;
  // Attention block: LayerNorm, QKV projection, scores, softmax, weighted values,
  // output projection. Matrix FLOPs per sequence: 2·s·h·(h + 2 kv_h) + 2·s²·h + 2·s²·h +
  // 2·s·h·h (2·s·h·3h for the QKV projection with as many key/value heads as heads).
  Layer att = BaseRecord(d, std::move(name), LayerKind::kAttention, block);
  att.causal = causal;
  att.flash_attention = d.flash;
  const double qkvo = static_cast<double>(2 * h + 2 * kv_h);  // columns of Q, K, V and O
  att.fwd_flops_per_sample = 2.0 * sd * hd * qkvo + 4.0 * sd * sd * hd;
  att.bwd_flops_per_sample = 2.0 * att.fwd_flops_per_sample;
  att.params = 2 * h * h + 2 * h * kv_h + 2 * h + 2 * kv_h + 2 * h;
  // Korthikanti et al. 2022, Sec. 4.1: 11sh + 5as² for attention, 2sh for its LayerNorm.
  // The 11sh: the QKV input 2sh, Q 2sh, K and V 2sh each (2 s kv_h under GQA), the
  // projection's input 2sh, its dropout mask sh. The 5as²: softmax output 2as², its dropout
  // mask as², the dropped-out scores 2as²; FlashAttention keeps none of them, only the
  // softmax's log-sum-exp (fp32, 4as) and recomputes the scores in backward.
  att.activation_score_bytes_per_sample = att.flash_attention ? 0 : 5 * a * s * s;
  att.activation_bytes_per_sample =
      9 * s * h + 4 * s * kv_h + att.activation_score_bytes_per_sample + (att.flash_attention ? 4 * a * s : 0);
  // Not split by TP: LayerNorm input 2sh, QKV input 2sh, output dropout mask sh.
  att.activation_replicated_bytes_per_sample = 5 * s * h;
  att.tp_fwd_allreduce_bytes_per_sample = 2 * s * h;  // after the row-parallel projection
  att.tp_bwd_allreduce_bytes_per_sample = 2 * s * h;  // before the column-parallel QKV
  return att;
}

Layer MoeRecord(const TransformerDims& d, std::string name, std::int64_t block, std::int64_t e, std::int64_t k) {
  const std::int64_t h = d.h, s = d.s, f = d.f;
  const double hd = static_cast<double>(h), sd = static_cast<double>(s), fd = static_cast<double>(f);
  // MoE block: gate (h x E), each token through top_k expert FFNs.
  Layer moe = BaseRecord(d, std::move(name), LayerKind::kMoe, block);
  moe.experts = e;
  moe.top_k = k;
  // SwiGLU experts (Mixtral): three matrices each, and the gate's and up's outputs kept.
  moe.swiglu = d.swiglu;
  const double expert_matrices = moe.swiglu ? 6.0 : 4.0;
  moe.fwd_flops_per_sample =
      2.0 * sd * hd * static_cast<double>(e) + static_cast<double>(k) * expert_matrices * sd * hd * fd;
  moe.bwd_flops_per_sample = 2.0 * moe.fwd_flops_per_sample;
  moe.expert_params = moe.swiglu ? 3 * h * f + 2 * f + h : 2 * h * f + f + h;
  moe.params = e * moe.expert_params + h * e + 2 * h;
  moe.activation_bytes_per_sample = 4 * s * h + k * (3 * s * h + (moe.swiglu ? 6 : 4) * s * f);
  moe.activation_replicated_bytes_per_sample = 4 * s * h;
  return moe;
}

Layer MlpRecord(const TransformerDims& d, std::string name, std::int64_t block) {
  const std::int64_t h = d.h, s = d.s, f = d.f;
  const double hd = static_cast<double>(h), sd = static_cast<double>(s), fd = static_cast<double>(f);
  // MLP block: LayerNorm, h -> f, GeLU, f -> h. Matrix FLOPs 2·2·s·h·f. SwiGLU: gate and
  // up h -> f, SiLU(gate) x up, down f -> h: 3·2·s·h·f.
  Layer mlp = BaseRecord(d, std::move(name), LayerKind::kMlp, block);
  mlp.swiglu = d.swiglu;
  mlp.fwd_flops_per_sample = (mlp.swiglu ? 6.0 : 4.0) * sd * hd * fd;
  mlp.bwd_flops_per_sample = 2.0 * mlp.fwd_flops_per_sample;
  mlp.params = mlp.swiglu ? 3 * h * f + 2 * f + h + 2 * h : 2 * h * f + f + h + 2 * h;
  // Korthikanti: 19sh for f = 4h (2sh input, 8sh GeLU in, 8sh GeLU out, sh mask) + 2sh
  // LayerNorm; in general 5sh + 4sf. SwiGLU keeps the gate's and up's outputs and their
  // product (the down projection's input): 5sh + 6sf.
  mlp.activation_bytes_per_sample = 5 * s * h + (mlp.swiglu ? 6 : 4) * s * f;
  mlp.activation_replicated_bytes_per_sample = 5 * s * h;  // LayerNorm, fc1 input, dropout mask
  mlp.tp_fwd_allreduce_bytes_per_sample = 2 * s * h;
  mlp.tp_bwd_allreduce_bytes_per_sample = 2 * s * h;
  return mlp;
}

Layer HeadRecord(const TransformerDims& d, bool tied, bool mlm_transform) {
  const std::int64_t h = d.h, s = d.s, v = d.v;
  const double hd = static_cast<double>(h), sd = static_cast<double>(s);
  // Output head: final LayerNorm, logits (2·s·h·V), softmax cross-entropy in fp32.
  Layer head = BaseRecord(d, "head", LayerKind::kHead, -1);
  head.fwd_flops_per_sample = 2.0 * sd * hd * static_cast<double>(v);
  if (mlm_transform) head.fwd_flops_per_sample += 2.0 * sd * hd * hd;  // BERT's MLM transform
  head.bwd_flops_per_sample = 2.0 * head.fwd_flops_per_sample;
  head.params = 2 * h + (mlm_transform ? h * h + 3 * h : 0);
  if (tied) {
    head.shared_params = v * h;  // the output matrix is the embedding's
  } else {
    head.params += v * h;
  }
  head.activation_bytes_per_sample = 4 * s * h + 4 * s * v;
  head.activation_replicated_bytes_per_sample = 4 * s * h;  // logits are vocab-parallel
  head.output_bytes_per_sample = 0;
  head.tp_bwd_allreduce_bytes_per_sample = 2 * s * h;  // gradient of the replicated input
  return head;
}

}  // namespace testbed
