#include "testbed/model_graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "memory_budget.h"

namespace testbed {

const char* LayerKindName(LayerKind kind) noexcept {
  switch (kind) {
    case LayerKind::kEmbedding: return "embedding";
    case LayerKind::kAttention: return "attention";
    case LayerKind::kMlp: return "mlp";
    case LayerKind::kMoe: return "moe";
    case LayerKind::kHead: return "head";
    case LayerKind::kGnn: return "gnn";
    case LayerKind::kDense: return "dense";
    case LayerKind::kGiven: return "given";
  }
  return "?";
}

std::int64_t ModelGraph::TotalParams() const noexcept {
  std::int64_t total = 0;
  for (const Layer& l : layers) total += l.params;
  return total;
}

double ModelGraph::FwdFlopsPerSample() const noexcept {
  double total = 0;
  for (const Layer& l : layers) total += l.fwd_flops_per_sample;
  return total;
}

double ModelGraph::TrainFlopsPerSample() const noexcept {
  double total = 0;
  for (const Layer& l : layers) total += l.fwd_flops_per_sample + l.bwd_flops_per_sample;
  return total;
}

namespace {

absl::Status CheckShape(const ModelShape& s) {
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("model '", s.name, "': ", what));
  };
  if (s.family != "gpt" && s.family != "bert" && s.family != "moe-gpt" && s.family != "mlp") {
    return bad(absl::StrCat("family '", s.family, "' is not one of gpt, bert, moe-gpt, mlp"));
  }
  if (s.layers < 1) return bad("layers must be >= 1");
  if (s.hidden < 1) return bad("hidden must be >= 1");
  if (s.family == "mlp") {
    if (s.inputs < 1) return bad("an mlp needs inputs >= 1 (input features)");
    if (s.vocab < 2) return bad("an mlp needs vocab >= 2 (classes)");
    return absl::OkStatus();
  }
  if (s.heads < 1 || s.hidden % s.heads != 0) {
    return bad(absl::StrCat("hidden (", s.hidden, ") must be a positive multiple of heads (", s.heads, ")"));
  }
  if (s.seq_len < 1) return bad("seq_len must be >= 1");
  if (s.vocab < 1) return bad("vocab must be >= 1");
  if (s.ffn_hidden < 0) return bad("ffn_hidden must be >= 0 (0: 4 x hidden)");
  if (s.experts < 0) return bad("experts must be >= 0");
  if (s.family == "moe-gpt" && s.experts < 1) return bad("an moe-gpt model needs experts >= 1");
  if (s.experts > 0 && (s.top_k < 1 || s.top_k > s.experts)) {
    return bad(absl::StrCat("top_k (", s.top_k, ") must be in [1, experts = ", s.experts, "]"));
  }
  // Sizes derived from these are 64-bit integers (parameters, bytes): checked here in floating
  // point, so a shape whose counts would overflow is refused instead of wrapping.
  const double h = static_cast<double>(s.hidden), seq = static_cast<double>(s.seq_len);
  const double f = s.ffn_hidden > 0 ? static_cast<double>(s.ffn_hidden) : 4 * h;
  const double params = static_cast<double>(s.layers) * (4 * h * h + 2 * h * f * std::max<double>(1, s.experts)) +
                        static_cast<double>(s.vocab) * h + seq * h;
  if (params > 1e17) {
    return bad(absl::StrFormat("about %.3g parameters, more than the 1e17 the testbed counts exactly (lower layers, "
                               "hidden, ffn_hidden, experts or vocab)", params));
  }
  if (seq * std::max(h, f) > 1e12) {
    return bad(absl::StrFormat("seq_len x hidden (or ffn_hidden) is %.3g elements per sample, more than 1e12",
                               seq * std::max(h, f)));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// An MLP classifier: `layers` dense layers with GELU (the first from the inputs), then a dense
// layer to the classes. Each layer's FLOPs are per sample (one row).
ModelGraph BuildMlp(const ModelShape& shape) {
  ModelGraph g;
  g.shape = shape;
  g.shape.seq_len = 1;
  std::int64_t in = shape.inputs;
  for (std::int64_t i = 0; i <= shape.layers; ++i) {
    const bool last = i == shape.layers;
    const std::int64_t out = last ? shape.vocab : shape.hidden;
    Layer l;
    l.name = last ? "classifier" : absl::StrCat("dense", i);
    l.kind = LayerKind::kDense;
    l.hidden = out;
    l.ffn_hidden = in;  // the layer's input width
    l.seq_len = 1;
    l.vocab = shape.vocab;
    l.fwd_flops_per_sample = 2.0 * static_cast<double>(in) * static_cast<double>(out);
    l.bwd_flops_per_sample = 2.0 * l.fwd_flops_per_sample;
    l.params = in * out + out;
    l.activation_bytes_per_sample = 4 * (in + out);  // fp32 input and pre-activation
    l.activation_replicated_bytes_per_sample = l.activation_bytes_per_sample;
    l.output_bytes_per_sample = 4 * out;
    g.layers.push_back(l);
    in = out;
  }
  return g;
}

}  // namespace

namespace {

// Family "layers": the given layers in order, each `repeat` times; each is a unit of its own
// (planners cut stages between any two).
absl::StatusOr<ModelGraph> BuildGiven(const ModelShape& shape) {
  if (shape.given.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", shape.name, "': family \"layers\" needs its layers given"));
  }
  ModelGraph g;
  g.shape = shape;
  g.shape.seq_len = 1;
  std::int64_t block = 0;
  for (const GivenLayer& gl : shape.given) {
    if (gl.fwd_s < 0 || gl.bwd_s < 0 || gl.repeat < 1 || gl.params < 0 || gl.micro_batch < 0 ||
        gl.activation_bytes_per_sample < 0 || gl.output_bytes_per_sample < 0) {
      return absl::InvalidArgumentError(absl::StrCat("model '", shape.name, "', layer '", gl.name,
                                                     "': times, sizes and counts must be >= 0 (repeat >= 1)"));
    }
    for (std::int64_t r = 0; r < gl.repeat; ++r) {
      Layer l;
      l.name = gl.repeat > 1 ? absl::StrCat(gl.name, r) : gl.name;
      l.kind = LayerKind::kGiven;
      l.block = block++;
      l.seq_len = 1;
      // A checkpoint keeps the layer's input, about the size of what a layer hands on.
      l.hidden = std::max<std::int64_t>(1, gl.output_bytes_per_sample / 2);
      l.params = gl.params;
      l.activation_bytes_per_sample = gl.activation_bytes_per_sample;
      l.output_bytes_per_sample = gl.output_bytes_per_sample;
      l.given_fwd_s = gl.fwd_s;
      l.given_bwd_s = gl.bwd_s;
      l.given_micro_batch = gl.micro_batch;
      g.layers.push_back(std::move(l));
    }
  }
  g.shape.layers = block;
  return g;
}

}  // namespace

// What the graph of `layers` layers takes (each Layer with its name), refused before it is
// built when that would not fit.
absl::Status CheckGraphSize(const ModelShape& shape, double layers) {
  constexpr double kPerLayer = sizeof(Layer) + 48;
  return CheckMemoryAllowance(absl::StrCat("model '", shape.name, "' (", absl::StrFormat("%.0f", layers), " layers)"),
                              layers * kPerLayer, 0, "use fewer layers");
}

absl::StatusOr<ModelGraph> BuildModelGraph(const ModelShape& shape) {
  if (shape.family == "layers") {
    double layers = 0;
    for (const GivenLayer& gl : shape.given) layers += static_cast<double>(std::max<std::int64_t>(0, gl.repeat));
    if (absl::Status st = CheckGraphSize(shape, layers); !st.ok()) return st;
    return BuildGiven(shape);
  }
  if (absl::Status st = CheckShape(shape); !st.ok()) return st;
  if (absl::Status st = CheckGraphSize(shape, 2.0 * static_cast<double>(shape.layers) + 2); !st.ok()) return st;
  if (shape.family == "mlp") return BuildMlp(shape);
  ModelGraph g;
  g.shape = shape;
  const std::int64_t h = shape.hidden, s = shape.seq_len, a = shape.heads, v = shape.vocab;
  const std::int64_t f = shape.ffn_hidden > 0 ? shape.ffn_hidden : 4 * h;
  g.shape.ffn_hidden = f;
  const bool causal = shape.family != "bert";
  const double hd = static_cast<double>(h), sd = static_cast<double>(s), fd = static_cast<double>(f);

  auto base = [&](std::string name, LayerKind kind, std::int64_t block) {
    Layer l;
    l.name = std::move(name);
    l.kind = kind;
    l.block = block;
    l.hidden = h;
    l.ffn_hidden = f;
    l.heads = a;
    l.seq_len = s;
    l.vocab = v;
    l.causal = causal;
    l.output_bytes_per_sample = 2 * s * h;  // fp16 hidden states handed to the next layer
    return l;
  };

  // Token and position embeddings (lookups: no matrix FLOPs). Megatron's vocab-parallel
  // embedding all-reduces its output in forward; its input needs no gradient.
  Layer emb = base("embedding", LayerKind::kEmbedding, -1);
  emb.params = v * h + s * h;
  emb.activation_bytes_per_sample = s * h;  // dropout mask, one byte per element
  emb.activation_replicated_bytes_per_sample = s * h;
  emb.tp_fwd_allreduce_bytes_per_sample = 2 * s * h;
  g.layers.push_back(emb);

  for (std::int64_t b = 0; b < shape.layers; ++b) {
    // Attention block: LayerNorm, QKV projection, scores, softmax, weighted values,
    // output projection. Matrix FLOPs per sequence: 2·s·h·3h + 2·s²·h + 2·s²·h + 2·s·h·h.
    Layer att = base(absl::StrCat("block", b, ".attention"), LayerKind::kAttention, b);
    att.fwd_flops_per_sample = 8.0 * sd * hd * hd + 4.0 * sd * sd * hd;
    att.bwd_flops_per_sample = 2.0 * att.fwd_flops_per_sample;
    att.params = 4 * h * h + 4 * h + 2 * h;
    // Korthikanti et al. 2022, Sec. 4.1: 11sh + 5as² for attention, 2sh for its LayerNorm.
    att.activation_score_bytes_per_sample = 5 * a * s * s;
    att.activation_bytes_per_sample = 13 * s * h + att.activation_score_bytes_per_sample;
    // Not split by TP: LayerNorm input 2sh, QKV input 2sh, output dropout mask sh.
    att.activation_replicated_bytes_per_sample = 5 * s * h;
    att.tp_fwd_allreduce_bytes_per_sample = 2 * s * h;  // after the row-parallel projection
    att.tp_bwd_allreduce_bytes_per_sample = 2 * s * h;  // before the column-parallel QKV
    g.layers.push_back(att);

    if (shape.experts > 0) {
      // MoE block: gate (h x E), each token through top_k expert FFNs.
      const std::int64_t e = shape.experts, k = shape.top_k;
      Layer moe = base(absl::StrCat("block", b, ".moe"), LayerKind::kMoe, b);
      moe.experts = e;
      moe.top_k = k;
      moe.fwd_flops_per_sample = 2.0 * sd * hd * static_cast<double>(e) + static_cast<double>(k) * 4.0 * sd * hd * fd;
      moe.bwd_flops_per_sample = 2.0 * moe.fwd_flops_per_sample;
      moe.expert_params = 2 * h * f + f + h;
      moe.params = e * moe.expert_params + h * e + 2 * h;
      moe.activation_bytes_per_sample = 4 * s * h + k * (3 * s * h + 4 * s * f);
      moe.activation_replicated_bytes_per_sample = 4 * s * h;
      g.layers.push_back(moe);
    } else {
      // MLP block: LayerNorm, h -> f, GeLU, f -> h. Matrix FLOPs 2·2·s·h·f.
      Layer mlp = base(absl::StrCat("block", b, ".mlp"), LayerKind::kMlp, b);
      mlp.fwd_flops_per_sample = 4.0 * sd * hd * fd;
      mlp.bwd_flops_per_sample = 2.0 * mlp.fwd_flops_per_sample;
      mlp.params = 2 * h * f + f + h + 2 * h;
      // Korthikanti: 19sh for f = 4h (2sh input, 8sh GeLU in, 8sh GeLU out, sh mask) + 2sh
      // LayerNorm; in general 5sh + 4sf.
      mlp.activation_bytes_per_sample = 5 * s * h + 4 * s * f;
      mlp.activation_replicated_bytes_per_sample = 5 * s * h;  // LayerNorm, fc1 input, dropout mask
      mlp.tp_fwd_allreduce_bytes_per_sample = 2 * s * h;
      mlp.tp_bwd_allreduce_bytes_per_sample = 2 * s * h;
      g.layers.push_back(mlp);
    }
  }

  // Output head: final LayerNorm, logits (2·s·h·V), softmax cross-entropy in fp32.
  Layer head = base("head", LayerKind::kHead, -1);
  head.fwd_flops_per_sample = 2.0 * sd * hd * static_cast<double>(v);
  if (!causal) head.fwd_flops_per_sample += 2.0 * sd * hd * hd;  // BERT's MLM transform
  head.bwd_flops_per_sample = 2.0 * head.fwd_flops_per_sample;
  head.params = 2 * h + (causal ? 0 : h * h + 3 * h);
  if (shape.tied_embeddings) {
    head.shared_params = v * h;  // the output matrix is the embedding's
  } else {
    head.params += v * h;
  }
  head.activation_bytes_per_sample = 4 * s * h + 4 * s * v;
  head.activation_replicated_bytes_per_sample = 4 * s * h;  // logits are vocab-parallel
  head.output_bytes_per_sample = 0;
  head.tp_bwd_allreduce_bytes_per_sample = 2 * s * h;  // gradient of the replicated input
  g.layers.push_back(head);
  return g;
}

}  // namespace testbed
