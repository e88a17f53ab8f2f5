#include "model_seq.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model_records.h"

namespace testbed {

Layer LstmRecord(std::string name, std::int64_t block, std::int64_t in, std::int64_t hidden, std::int64_t seq_len,
                 std::int64_t vocab, std::int64_t directions) {
  Layer l;
  l.name = std::move(name);
  l.kind = LayerKind::kLstm;
  l.block = block;
  l.hidden = hidden;
  l.ffn_hidden = in;
  l.heads = 1;
  l.seq_len = seq_len;
  l.vocab = vocab;
  l.lstm_directions = directions;
  const double s = static_cast<double>(seq_len), h = static_cast<double>(hidden), x = static_cast<double>(in);
  const double dirs = static_cast<double>(directions);
  // Per direction and token: the input and the recurrent product into the 4 gates.
  l.fwd_flops_per_sample = dirs * 2.0 * s * 4.0 * h * (x + h);
  l.bwd_flops_per_sample = 2.0 * l.fwd_flops_per_sample;
  // PyTorch's nn.LSTM: weight_ih 4h x in, weight_hh 4h x h, two biases of 4h, per direction.
  l.params = directions * (4 * hidden * (in + hidden) + 8 * hidden);
  // Kept for backward, 16-bit, per token: the input once; per direction the 4 activated
  // gates, the cell state, its tanh and the previous hidden state (cuDNN's reserve space
  // holds the same).
  l.activation_bytes_per_sample = 2 * seq_len * in + directions * 2 * seq_len * 7 * hidden;
  l.activation_replicated_bytes_per_sample = l.activation_bytes_per_sample;
  l.output_bytes_per_sample = 2 * seq_len * hidden * directions;
  return l;
}

namespace {

// Softmax over the vocabulary from `hidden` features (bias, no norm), untied or tied.
Layer SoftmaxHead(std::int64_t hidden, std::int64_t s, std::int64_t v, bool tied) {
  Layer head;
  head.name = "head";
  head.kind = LayerKind::kHead;
  head.hidden = hidden;
  head.ffn_hidden = hidden;
  head.heads = 1;
  head.seq_len = s;
  head.vocab = v;
  const double sd = static_cast<double>(s), hd = static_cast<double>(hidden), vd = static_cast<double>(v);
  head.fwd_flops_per_sample = 2.0 * sd * hd * vd;
  head.bwd_flops_per_sample = 2.0 * head.fwd_flops_per_sample;
  head.params = v + (tied ? 0 : v * hidden);
  if (tied) head.shared_params = v * hidden;
  head.activation_bytes_per_sample = 2 * s * hidden + 4 * s * v;  // input, fp32 logits
  head.activation_replicated_bytes_per_sample = 2 * s * hidden;
  return head;
}

// One table of `v` rows x `h` looked up by `streams` sequences of `s` tokens per sample.
Layer TableEmbedding(std::int64_t h, std::int64_t s, std::int64_t v, std::int64_t streams) {
  Layer emb;
  emb.name = "embedding";
  emb.kind = LayerKind::kEmbedding;
  emb.hidden = h;
  emb.ffn_hidden = h;
  emb.heads = 1;
  emb.seq_len = s;
  emb.vocab = v;
  emb.embedding_streams = streams;
  emb.params = v * h;
  emb.activation_bytes_per_sample = streams * s * h;  // dropout masks, a byte an element
  emb.activation_replicated_bytes_per_sample = emb.activation_bytes_per_sample;
  emb.output_bytes_per_sample = streams * 2 * s * h;
  return emb;
}

absl::Status CheckSeqShape(const ModelShape& s) {
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("model '", s.name, "' (", s.family, "): ", what));
  };
  const bool decoder = s.family != "lstm";
  if (s.layers < (s.family == "gnmt" ? 2 : 1)) {
    return bad(s.family == "gnmt" ? "layers (the encoder's LSTM layers) must be >= 2: a bidirectional one, then one "
                                    "from its two directions"
                                  : "layers must be >= 1");
  }
  if (decoder && s.decoder_layers < 1) return bad("decoder_layers must be >= 1");
  if (!decoder && s.decoder_layers != 0) return bad("decoder_layers is a key of encoder-decoder models (gnmt, transformer)");
  if (s.hidden < 1) return bad("hidden must be >= 1");
  if (s.seq_len < 1) return bad("seq_len must be >= 1");
  if (s.vocab < 2) return bad("vocab must be >= 2");
  if (s.experts != 0) return bad("experts: MoE layers are for the gpt families");
  const double h = static_cast<double>(s.hidden), blocks = static_cast<double>(s.layers + s.decoder_layers);
  const double params = blocks * 16.0 * h * h + 2.0 * static_cast<double>(s.vocab) * h;
  if (params > 1e17) {
    return bad(absl::StrFormat("about %.3g parameters, more than the 1e17 the testbed counts exactly", params));
  }
  if (static_cast<double>(s.seq_len) * h > 1e12) return bad("seq_len x hidden is more than 1e12 elements per sample");
  return absl::OkStatus();
}

ModelGraph BuildLstmLm(const ModelShape& shape) {
  ModelGraph g;
  g.shape = shape;
  const std::int64_t h = shape.hidden, s = shape.seq_len, v = shape.vocab;
  g.layers.push_back(TableEmbedding(h, s, v, 1));
  for (std::int64_t b = 0; b < shape.layers; ++b) {
    g.layers.push_back(LstmRecord(absl::StrCat("lstm", b), b, h, h, s, v, 1));
  }
  g.layers.push_back(SoftmaxHead(h, s, v, shape.tied_embeddings));
  return g;
}

ModelGraph BuildGnmt(const ModelShape& shape) {
  ModelGraph g;
  g.shape = shape;
  const std::int64_t h = shape.hidden, s = shape.seq_len, v = shape.vocab;
  g.layers.push_back(TableEmbedding(h, s, v, 2));
  // The target embeddings travel with the encoder's states to the decoder.
  const std::int64_t carried = 2 * s * h;
  std::int64_t block = 0;
  Layer first = LstmRecord("encoder0", block++, h, h, s, v, 2);
  first.output_bytes_per_sample += carried;
  g.layers.push_back(first);
  for (std::int64_t i = 1; i < shape.layers; ++i) {
    Layer l = LstmRecord(absl::StrCat("encoder", i), block++, i == 1 ? 2 * h : h, h, s, v, 1);
    l.output_bytes_per_sample += carried;
    g.layers.push_back(l);
  }
  // The decoder's first layer, then attention over the encoder's outputs (queried by that
  // layer's states); every later decoder layer reads its input and the attention context.
  Layer dec0 = LstmRecord("decoder0", block, h, h, s, v, 1);
  dec0.output_bytes_per_sample += 2 * s * h;  // the encoder's outputs, for the attention
  g.layers.push_back(dec0);
  TransformerDims d;
  d.h = h;
  d.s = s;
  d.a = 1;
  d.kv = 1;
  d.v = v;
  d.f = h;
  d.causal = false;
  Layer att = AttentionRecord(d, "decoder0.attention", block++, false);
  att.cross_attention = true;
  att.output_bytes_per_sample = 2 * 2 * s * h;  // the states and their context
  g.layers.push_back(att);
  for (std::int64_t i = 1; i < shape.decoder_layers; ++i) {
    Layer l = LstmRecord(absl::StrCat("decoder", i), block++, 2 * h, h, s, v, 1);
    if (i + 1 < shape.decoder_layers) l.output_bytes_per_sample += 2 * s * h;  // the context
    g.layers.push_back(l);
  }
  g.layers.push_back(SoftmaxHead(h, s, v, shape.tied_embeddings));
  return g;
}

ModelGraph BuildEncoderDecoder(const ModelShape& shape) {
  ModelGraph g;
  g.shape = shape;
  const TransformerDims d = DimsOf(shape);
  g.shape.ffn_hidden = d.f;
  g.shape.kv_heads = d.kv;
  const std::int64_t carried = 2 * d.s * d.h;  // target embeddings, then the encoder's output
  Layer emb = TableEmbedding(d.h, d.s, d.v, 2);
  emb.tp_fwd_allreduce_bytes_per_sample = 2 * 2 * d.s * d.h;
  g.layers.push_back(emb);
  std::int64_t block = 0;
  for (std::int64_t b = 0; b < shape.layers; ++b, ++block) {
    for (Layer l : {AttentionRecord(d, absl::StrCat("encoder", b, ".attention"), block, false),
                    MlpRecord(d, absl::StrCat("encoder", b, ".mlp"), block)}) {
      l.causal = false;
      l.output_bytes_per_sample += carried;
      g.layers.push_back(l);
    }
  }
  for (std::int64_t b = 0; b < shape.decoder_layers; ++b, ++block) {
    Layer self = AttentionRecord(d, absl::StrCat("decoder", b, ".attention"), block, true);
    Layer cross = AttentionRecord(d, absl::StrCat("decoder", b, ".cross_attention"), block, false);
    cross.cross_attention = true;
    Layer mlp = MlpRecord(d, absl::StrCat("decoder", b, ".mlp"), block);
    for (Layer* l : {&self, &cross, &mlp}) {
      if (b + 1 < shape.decoder_layers || l != &mlp) l->output_bytes_per_sample += carried;
      g.layers.push_back(*l);
    }
  }
  Layer head = HeadRecord(d, shape.tied_embeddings, false);
  head.causal = true;
  g.layers.push_back(head);
  return g;
}

}  // namespace

absl::StatusOr<ModelGraph> BuildSeqModel(const ModelShape& shape) {
  if (absl::Status st = CheckSeqShape(shape); !st.ok()) return st;
  if (shape.family == "lstm") return BuildLstmLm(shape);
  if (shape.family == "gnmt") return BuildGnmt(shape);
  return BuildEncoderDecoder(shape);
}

}  // namespace testbed
