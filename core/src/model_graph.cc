#include "testbed/model_graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "memory_budget.h"
#include "model_gnn.h"
#include "model_records.h"
#include "model_seq.h"

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
    case LayerKind::kConv: return "conv";
    case LayerKind::kGiven: return "given";
    case LayerKind::kLstm: return "lstm";
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

double ModelGraph::CausalTrainFlopsPerSample() const noexcept {
  double total = TrainFlopsPerSample();
  for (const Layer& l : layers) {
    if (l.kind != LayerKind::kAttention || !l.causal) continue;
    const double s = static_cast<double>(l.seq_len);
    total -= 0.5 * 12.0 * s * s * static_cast<double>(l.hidden);
  }
  return total;
}

namespace {

// Family "cnn": the input image, the convolution blocks (each halves the image, so it must
// still have 2 x 2 pixels or more when it reaches a pooling), the dense layers, the classes.
absl::Status CheckCnnShape(const ModelShape& s) {
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("model '", s.name, "' (cnn): ", what));
  };
  if (s.channels < 1) return bad(absl::StrCat("channels must be >= 1 (input channels); got ", s.channels));
  if (s.image_size < 1) return bad(absl::StrCat("image_size must be >= 1 (pixels per side); got ", s.image_size));
  if (s.conv_channels.empty()) return bad("conv_channels needs at least one entry (output channels of a conv block)");
  const double image = static_cast<double>(s.image_size);
  double in_channels = static_cast<double>(s.channels), params = 0, elements = in_channels * image * image;
  std::int64_t size = s.image_size;
  for (size_t i = 0; i < s.conv_channels.size(); ++i) {
    const std::int64_t c = s.conv_channels[i];
    if (c < 1) return bad(absl::StrCat("conv_channels[", i, "] is ", c, "; every entry must be >= 1"));
    if (size < 2) {
      return bad(absl::StrCat("image_size ", s.image_size, " is too small for ", s.conv_channels.size(),
                              " conv blocks: each 2x2 max-pooling halves the image, so image_size must be >= ",
                              std::int64_t{1} << std::min<size_t>(s.conv_channels.size(), 62)));
    }
    params += static_cast<double>(c) * (in_channels * 9 + 1);
    elements = std::max(elements, static_cast<double>(c) * static_cast<double>(size) * static_cast<double>(size));
    in_channels = static_cast<double>(c);
    size /= 2;
  }
  const double flattened = in_channels * static_cast<double>(size) * static_cast<double>(size);
  const double derived = static_cast<double>(s.channels) * image * image;
  if (s.inputs != 0 && static_cast<double>(s.inputs) != derived) {
    return bad(absl::StrCat("inputs (", s.inputs, ") must be channels x image_size^2 = ",
                            absl::StrFormat("%.0f", derived), " (or left out)"));
  }
  if (s.layers < 0) return bad(absl::StrCat("layers (dense layers after the conv blocks) must be >= 0; got ", s.layers));
  if (s.layers > 0 && s.hidden < 1) return bad("hidden must be >= 1 (the width of the dense layers; layers > 0)");
  if (s.vocab < 2) return bad("a cnn needs vocab >= 2 (classes)");
  const double h = static_cast<double>(std::max<std::int64_t>(0, s.hidden));
  params += s.layers > 0 ? flattened * h + static_cast<double>(s.layers - 1) * h * h + h * static_cast<double>(s.vocab)
                         : flattened * static_cast<double>(s.vocab);
  if (elements > 1e12) {
    return bad(absl::StrFormat("a feature map of %.3g elements per sample, more than 1e12 (lower image_size or "
                               "conv_channels)", elements));
  }
  if (params > 1e17) {
    return bad(absl::StrFormat("about %.3g parameters, more than the 1e17 the testbed counts exactly (lower "
                               "conv_channels, layers, hidden or vocab)", params));
  }
  return absl::OkStatus();
}

absl::Status CheckShape(const ModelShape& s) {
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("model '", s.name, "': ", what));
  };
  static const char* kFamilies[] = {"gpt", "bert", "moe-gpt", "mlp", "cnn", "gnn", "lstm", "gnmt", "transformer"};
  if (std::find(std::begin(kFamilies), std::end(kFamilies), s.family) == std::end(kFamilies)) {
    return bad(absl::StrCat("family '", s.family, "' is not one of gpt, bert, moe-gpt, mlp, cnn, gnn, lstm, gnmt, "
                            "transformer"));
  }
  const bool encoder_decoder = s.family == "gnmt" || s.family == "transformer";
  if (!encoder_decoder && s.decoder_layers != 0) {
    return bad(absl::StrCat("decoder_layers (", s.decoder_layers, ") is a key of the encoder-decoder families gnmt "
                            "and transformer, not ", s.family));
  }
  if (s.family == "lstm" || s.family == "gnmt") return absl::OkStatus();  // BuildSeqModel checks its shape
  if (s.family == "cnn") return CheckCnnShape(s);
  if (s.family == "gnn") return absl::OkStatus();  // BuildGnn checks its shape
  if (s.family == "mlp") {
    // layers = 0: the classifier alone, a linear model (logistic or least-squares regression).
    if (s.layers < 0) return bad("an mlp needs layers >= 0 (hidden layers)");
    if (s.layers > 0 && s.hidden < 1) return bad("hidden must be >= 1");
    if (s.inputs < 1) return bad("an mlp needs inputs >= 1 (input features)");
    if (s.vocab < 2) return bad("an mlp needs vocab >= 2 (classes)");
    return absl::OkStatus();
  }
  if (s.layers < 1) return bad("layers must be >= 1");
  if (s.hidden < 1) return bad("hidden must be >= 1");
  if (s.heads < 1 || s.hidden % s.heads != 0) {
    return bad(absl::StrCat("hidden (", s.hidden, ") must be a positive multiple of heads (", s.heads, ")"));
  }
  if (s.kv_heads < 0 || (s.kv_heads > 0 && s.heads % s.kv_heads != 0)) {
    return bad(absl::StrCat("kv_heads (", s.kv_heads, ") must divide heads (", s.heads, "); 0 means heads"));
  }
  if (s.ffn != "gelu" && s.ffn != "swiglu") return bad(absl::StrCat("ffn '", s.ffn, "' is not gelu or swiglu"));
  if (s.attention != "standard" && s.attention != "flash") {
    return bad(absl::StrCat("attention '", s.attention, "' is not standard or flash"));
  }
  if (s.positions != "learned" && s.positions != "rope") {
    return bad(absl::StrCat("positions '", s.positions, "' is not learned or rope"));
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

// One dense layer of a classifier, `in` -> `out` features per sample (one row), bias
// included; it keeps its input and pre-activation, `element_bytes` bytes per element.
Layer DenseRecord(std::string name, std::int64_t in, std::int64_t out, std::int64_t classes,
                  std::int64_t element_bytes) {
  Layer l;
  l.name = std::move(name);
  l.kind = LayerKind::kDense;
  l.hidden = out;
  l.ffn_hidden = in;  // the layer's input width
  l.seq_len = 1;
  l.vocab = classes;
  l.fwd_flops_per_sample = 2.0 * static_cast<double>(in) * static_cast<double>(out);
  l.bwd_flops_per_sample = 2.0 * l.fwd_flops_per_sample;
  l.params = in * out + out;
  l.activation_bytes_per_sample = element_bytes * (in + out);
  l.activation_replicated_bytes_per_sample = l.activation_bytes_per_sample;
  l.output_bytes_per_sample = element_bytes * out;
  return l;
}

// `layers` dense layers of width `hidden` with GELU from `in` features, then the classifier.
void AddDenseLayers(ModelGraph& g, std::int64_t in, std::int64_t element_bytes) {
  const ModelShape& shape = g.shape;
  for (std::int64_t i = 0; i <= shape.layers; ++i) {
    const bool last = i == shape.layers;
    const std::int64_t out = last ? shape.vocab : shape.hidden;
    g.layers.push_back(DenseRecord(last ? "classifier" : absl::StrCat("dense", i), in, out, shape.vocab, element_bytes));
    in = out;
  }
}

// An MLP classifier: `layers` dense layers with GELU (the first from the inputs), then a dense
// layer to the classes. Each layer's FLOPs are per sample (one row); its activations are
// counted in fp32 (4 bytes an element), as the executor trains it.
ModelGraph BuildMlp(const ModelShape& shape) {
  ModelGraph g;
  g.shape = shape;
  g.shape.seq_len = 1;
  AddDenseLayers(g, shape.inputs, 4);
  return g;
}

// A convolutional classifier (CheckCnnShape has passed): per entry of conv_channels a block
// "conv<i>" (3x3 convolution with stride 1 and zero padding 1, ReLU, 2x2 max-pooling with
// stride 2), then the dense layers and the classifier as for an mlp, from the flattened
// last feature map. Figures are per sample (one image) with 16-bit activations (2 bytes an
// element), as for the transformers.
ModelGraph BuildCnn(const ModelShape& shape) {
  constexpr std::int64_t kKernel = 3;
  ModelGraph g;
  g.shape = shape;
  g.shape.seq_len = 1;
  g.shape.inputs = shape.channels * shape.image_size * shape.image_size;
  std::int64_t in_channels = shape.channels, size = shape.image_size;
  for (size_t i = 0; i < shape.conv_channels.size(); ++i) {
    const std::int64_t out_channels = shape.conv_channels[i];
    const std::int64_t pixels = size * size, pooled = (size / 2) * (size / 2);
    const std::int64_t patch = in_channels * kKernel * kKernel;
    Layer l;
    l.name = absl::StrCat("conv", i);
    l.kind = LayerKind::kConv;
    l.seq_len = 1;
    l.vocab = shape.vocab;
    l.conv_in_channels = in_channels;
    l.conv_out_channels = out_channels;
    l.conv_image_size = size;
    l.conv_kernel = kKernel;
    l.ffn_hidden = in_channels * pixels;  // input elements
    l.hidden = out_channels * pooled;     // output elements, after pooling
    // Multiply-accumulates: every output pixel of every output channel over one patch
    // (padding keeps the image's size; padded taps are counted, as the GEMM computes them).
    const double macs = static_cast<double>(out_channels) * static_cast<double>(pixels) * static_cast<double>(patch);
    l.fwd_flops_per_sample = 2.0 * macs;
    l.bwd_flops_per_sample = 2.0 * l.fwd_flops_per_sample;  // input and weight gradients
    l.params = out_channels * patch + out_channels;          // weights and one bias per channel
    // Kept for backward: the convolution's input and the ReLU's output (2 bytes an element),
    // and the position of each pooling window's maximum (1 byte per pooled element).
    l.activation_bytes_per_sample = 2 * in_channels * pixels + 2 * out_channels * pixels + out_channels * pooled;
    l.activation_replicated_bytes_per_sample = l.activation_bytes_per_sample;
    l.output_bytes_per_sample = 2 * out_channels * pooled;
    g.layers.push_back(std::move(l));
    in_channels = out_channels;
    size /= 2;
  }
  AddDenseLayers(g, in_channels * size * size, 2);
  // Every layer but the classifier is a block of its own (what planners split into stages);
  // the classifier, like a transformer's head, joins the last stage.
  for (size_t i = 0; i + 1 < g.layers.size(); ++i) g.layers[i].block = static_cast<std::int64_t>(i);
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
  const double records = 2.0 * static_cast<double>(shape.layers) + 3.0 * static_cast<double>(shape.decoder_layers) + 3 +
                         static_cast<double>(shape.conv_channels.size());
  if (absl::Status st = CheckGraphSize(shape, records); !st.ok()) return st;
  if (shape.family == "mlp") return BuildMlp(shape);
  if (shape.family == "cnn") return BuildCnn(shape);
  if (shape.family == "gnn") return BuildGnn(shape);
  if (shape.family == "lstm" || shape.family == "gnmt" || shape.family == "transformer") return BuildSeqModel(shape);
  ModelGraph g;
  g.shape = shape;
  const TransformerDims d = DimsOf(shape);
  g.shape.ffn_hidden = d.f;
  g.shape.kv_heads = d.kv;
  g.layers.push_back(EmbeddingRecord(d));
  for (std::int64_t b = 0; b < shape.layers; ++b) {
    g.layers.push_back(AttentionRecord(d, absl::StrCat("block", b, ".attention"), b, d.causal));
    if (shape.experts > 0) {
      g.layers.push_back(MoeRecord(d, absl::StrCat("block", b, ".moe"), b, shape.experts, shape.top_k));
    } else {
      g.layers.push_back(MlpRecord(d, absl::StrCat("block", b, ".mlp"), b));
    }
  }
  g.layers.push_back(HeadRecord(d, shape.tied_embeddings, !d.causal));
  return g;
}

}  // namespace testbed
