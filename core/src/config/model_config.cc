#include "config/model_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace testbed {

const std::vector<ParamSpec>& ModelSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::String("name", "").Doc("model name shown in tables"),
      ParamSpec::String("doc", "").Doc("one line about the model and where its shape comes from"),
      ParamSpec::Choice("family", "gpt",
                        {"gpt", "bert", "moe-gpt", "mlp", "cnn", "gnn", "layers", "lstm", "gnmt", "transformer"})
          .Doc("causal GPT, bidirectional BERT, GPT with MoE FFNs, an MLP classifier, a convolutional classifier, a "
               "sampling-based GNN node classifier, layers with measured times, an LSTM language model, GNMT "
               "(LSTM encoder-decoder with attention) or an encoder-decoder Transformer"),
      ParamSpec::Int("layers", 0).Range(0, 1 << 24).Unit("blocks")
          .Doc("transformer blocks (mlp: hidden layers, cnn: dense layers after the conv blocks, 0 or more; lstm: "
               "LSTM layers; gnmt, transformer: the encoder's LSTM layers or blocks; others >= 1); required but for "
               "family layers"),
      ParamSpec::Int("decoder_layers", 0).Range(0, 1 << 24).Unit("blocks")
          .Doc("gnmt, transformer: the decoder's LSTM layers or blocks (>= 1); 0 for the other families"),
      ParamSpec::Int("hidden", 0).Range(1, 1 << 24).Unit("elements")
          .Doc("hidden size h (cnn: width of the dense layers, needed when layers > 0); required but for families "
               "layers and cnn"),
      ParamSpec::Int("heads", 0).Range(0, 1 << 20).Unit("heads").Doc("attention heads a (h divisible by a; transformers, and gat's hidden layers)"),
      ParamSpec::Int("ffn_hidden", 0).Range(0, 1 << 26).Unit("elements").Doc("FFN inner size; 0 means 4 x hidden"),
      ParamSpec::Int("seq_len", 1024).Range(1, 1 << 24).Unit("tokens").Doc("sequence length s"),
      ParamSpec::Int("vocab", 50257).Range(1, 2147483647).Unit("tokens").Doc("vocabulary size V"),
      ParamSpec::Int("experts", 0).Range(0, 1 << 20).Unit("experts").Doc("experts per MoE layer (0: dense)"),
      ParamSpec::Int("top_k", 1).Range(1, 1 << 20).Unit("experts").Doc("experts each token is routed to"),
      ParamSpec::Bool("tied_embeddings", true).Doc("output head shares the embedding matrix"),
      ParamSpec::Int("kv_heads", 0).Range(0, 1 << 20).Unit("heads")
          .Doc("key/value heads of grouped-query attention (dividing heads; 1: multi-query; 0: heads, multi-head)"),
      ParamSpec::Choice("ffn", "gelu", {"gelu", "swiglu"})
          .Doc("FFN: fc1, GeLU, fc2 (gelu) or gate and up projections, SiLU(gate) x up, down projection (swiglu)"),
      ParamSpec::Choice("attention", "standard", {"standard", "flash"})
          .Doc("attention implementation: standard (s^2 scores kept for backward) or flash (FlashAttention: fused, "
               "no s^2 activations, scores recomputed in backward)"),
      ParamSpec::Choice("positions", "learned", {"learned", "rope"})
          .Doc("position encoding: a learned table of seq_len x hidden, or rotary (no parameters)"),
      ParamSpec::Int("inputs", 0).Range(0, 1 << 30).Unit("features")
          .Doc("mlp: input features; gnn: features per vertex; cnn: channels x image_size^2 (derived when left out)"),
      ParamSpec::Int("channels", 1).Range(1, 1 << 16).Unit("channels").Doc("cnn: input image channels (1: grey-scale)"),
      ParamSpec::Int("image_size", 0).Range(1, 1 << 16).Unit("pixels")
          .Doc("cnn: rows = columns of the square input images; required for a cnn"),
      ParamSpec::IntList("conv_channels", {}).Range(1, 1 << 16).Unit("channels")
          .Doc("cnn: output channels of each conv block (3x3 convolution, stride 1, padding 1, ReLU, 2x2 max-pooling "
               "with stride 2), first to last; at least one; required for a cnn"),
      ParamSpec::IntList("fanouts", {}).Range(1, 1 << 20).Unit("neighbours")
          .Doc("gnn: neighbours sampled per vertex at each hop, seeds outward (e.g. 25, 10); one graph layer per "
               "entry; required for a gnn"),
      ParamSpec::Choice("gnn_layer", "sage", {"sage", "gcn", "gat"})
          .Doc("gnn: GraphSAGE (mean), GCN or GAT layers (GAT: `heads` heads in each hidden layer)"),
      ParamSpec::String("given_csv", "")
          .Doc("family layers: CSV of measured layers (name,fwd_ms,bwd_ms[,params,activation_mib,output_mib,micro_batch,repeat]), relative to this file"),
  };
  return schema;
}

// One measured layer of family "layers" (an entry of `given = [...]` or a CSV row).
const std::vector<ParamSpec>& GivenLayerSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::String("name", "layer").Doc("layer name (numbered when repeated)"),
      ParamSpec::Double("fwd_ms", 0).Min(0).Required().Unit("ms").Doc("forward time of one micro-batch"),
      ParamSpec::Double("bwd_ms", 0).Min(0).Required().Unit("ms").Doc("backward time of one micro-batch"),
      ParamSpec::Int("params", 0).Range(0, 1e15).Unit("parameters").Doc("parameters (their gradients are all-reduced)"),
      ParamSpec::Double("activation_mib", 0).Min(0).Unit("MiB").Doc("activations kept for backward, per sample"),
      ParamSpec::Double("output_mib", 0).Min(0).Unit("MiB").Doc("output handed to the next layer, per sample"),
      ParamSpec::Int("micro_batch", 0).Range(0, 1 << 20).Unit("samples").Doc("samples the times were measured for (0: the run's micro-batch)"),
      ParamSpec::Int("repeat", 1).Range(1, 1 << 24).Doc("copies of the layer in a row"),
  };
  return schema;
}

namespace {

GivenLayer GivenFrom(const ParamSet& p, ErrorList& errors) {
  GivenLayer g;
  constexpr double kMiB = 1048576.0;
  g.name = Declared<std::string>(p, "name", errors);
  g.fwd_s = Declared<double>(p, "fwd_ms", errors) * 1e-3;
  g.bwd_s = Declared<double>(p, "bwd_ms", errors) * 1e-3;
  g.params = Declared<std::int64_t>(p, "params", errors);
  g.activation_bytes_per_sample = static_cast<std::int64_t>(Declared<double>(p, "activation_mib", errors) * kMiB);
  g.output_bytes_per_sample = static_cast<std::int64_t>(Declared<double>(p, "output_mib", errors) * kMiB);
  g.micro_batch = Declared<std::int64_t>(p, "micro_batch", errors);
  g.repeat = Declared<std::int64_t>(p, "repeat", errors);
  return g;
}

// Measured layers from a CSV file: a header naming the columns (name, fwd_ms and bwd_ms at
// least; any of GivenLayerSchema), then one layer per row. Errors name the file and line.
void ReadGivenCsv(const std::filesystem::path& file, std::vector<GivenLayer>& out, ErrorList& errors) {
  std::ifstream in(file);
  if (!in) {
    errors.Add(absl::StrCat(file.string(), ": cannot read the measured layers file"));
    return;
  }
  std::string line;
  std::vector<std::string> header;
  int line_no = 0;
  const auto& schema = GivenLayerSchema();
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    for (std::string& c : cells) c = std::string(absl::StripAsciiWhitespace(c));
    const std::string where = absl::StrCat(file.string(), ":", line_no, ": ");
    if (header.empty()) {
      header = cells;
      for (const std::string& h : header) {
        if (std::none_of(schema.begin(), schema.end(), [&](const ParamSpec& s) { return s.name() == h; })) {
          errors.Add(absl::StrCat(where, "unknown column '", h, "'; expected name, fwd_ms, bwd_ms, params, activation_mib, "
                                         "output_mib, micro_batch, repeat"));
        }
      }
      for (const char* need : {"fwd_ms", "bwd_ms"}) {
        if (std::find(header.begin(), header.end(), need) == header.end()) {
          errors.Add(absl::StrCat(where, "the header has no '", need, "' column"));
        }
      }
      continue;
    }
    if (cells.size() != header.size()) {
      errors.Add(absl::StrCat(where, cells.size(), " fields; the header has ", header.size()));
      continue;
    }
    ParamSet p;
    for (const ParamSpec& s : schema) p.Set(s.name(), s.default_value());
    bool ok = true;
    for (size_t i = 0; i < header.size() && ok; ++i) {
      const auto spec = std::find_if(schema.begin(), schema.end(), [&](const ParamSpec& s) { return s.name() == header[i]; });
      if (spec == schema.end()) continue;
      if (spec->type() == ParamType::kString) {
        p.Set(spec->name(), cells[i]);
        continue;
      }
      double v = 0;
      if (!absl::SimpleAtod(cells[i], &v) || v < spec->min().value_or(0)) {
        errors.Add(absl::StrCat(where, "'", header[i], "': expected ", spec->DescribeExpected(), ", got '", cells[i], "'"));
        ok = false;
        break;
      }
      if (spec->type() == ParamType::kInt) {
        p.Set(spec->name(), static_cast<std::int64_t>(v));
      } else {
        p.Set(spec->name(), v);
      }
    }
    if (ok) out.push_back(GivenFrom(p, errors));
  }
  if (header.empty()) errors.Add(absl::StrCat(file.string(), ": no header line"));
}

}  // namespace

absl::StatusOr<ConfigDoc> MergeWithPreset(const ConfigDoc& doc, const KeyPath& section, const PresetLibrary& presets,
                                          const std::string& category, const std::string& preset_table) {
  const toml::table* table = doc.GetTable(section);
  ConfigDoc merged;
  KeyPath preset_path = section;
  preset_path.push_back("preset");
  if (table != nullptr) {
    if (const toml::node* p = table->get("preset")) {
      auto name = p->value_exact<std::string>();
      if (!name) {
        return absl::InvalidArgumentError(absl::StrCat(doc.Where(preset_path).ToString(), ": ",
                                                       PathToString(preset_path), ": expected a preset name (string)"));
      }
      auto preset = presets.Load(category, *name);
      if (!preset.ok()) {
        return absl::Status(preset.status().code(),
                            absl::StrCat(doc.Where(preset_path).ToString(), ": ", preset.status().message()));
      }
      if (preset->GetTable({preset_table}) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(preset->file(), ": preset has no [", preset_table, "] table"));
      }
      merged = ConfigDoc::Subtree(*preset, {preset_table});
    }
    for (auto&& [k, v] : *table) {
      if (k.str() == "preset") continue;
      KeyPath from = section;
      from.emplace_back(k.str());
      if (auto s = merged.Set({std::string(k.str())}, v, doc, from); !s.ok()) return s;
    }
  }
  merged.SetOrigin(doc.Where(section));
  return merged;
}

std::shared_ptr<const ModelGraph> ResolveModel(const ConfigDoc& doc, const KeyPath& section,
                                               const PresetLibrary& presets, ErrorList& errors) {
  if (doc.GetTable(section) == nullptr) {
    errors.Add(doc.Where(section), absl::StrCat("[", PathToString(section), "]: missing; give a preset or a shape"));
    return nullptr;
  }
  auto merged = MergeWithPreset(doc, section, presets, "models", "model");
  if (!merged.ok()) {
    errors.Add(merged.status());
    return nullptr;
  }
  const size_t before = errors.size();
  const std::string owner = absl::StrCat("[", PathToString(section), "]");
  ParamSet p = ResolveParams(*merged, {}, ModelSchema(), owner, {"given"}, errors);
  if (errors.size() != before) return nullptr;
  const std::string family = Declared<std::string>(p, "family", errors);
  const bool given = family == "layers", cnn = family == "cnn", gnn = family == "gnn";
  std::vector<const char*> required;
  if (!given && !gnn) required.push_back("layers");  // a gnn has one layer per fanout
  // An mlp of no hidden layers (a linear model) has no hidden width.
  const toml::node* layers_node = merged->Get({"layers"});
  const bool linear = family == "mlp" && layers_node != nullptr && layers_node->value<std::int64_t>() == 0;
  if (!given && !cnn && !linear) required.push_back("hidden");
  if (cnn) required.insert(required.end(), {"image_size", "conv_channels"});
  if (gnn) {
    for (const char* key : {"fanouts", "inputs", "vocab"}) required.push_back(key);
  }
  for (const char* key : required) {
    if (merged->Get({key}) == nullptr) {
      const auto spec = std::find_if(ModelSchema().begin(), ModelSchema().end(),
                                     [&](const ParamSpec& s) { return s.name() == key; });
      errors.Add(merged->Where({}), absl::StrCat(owner, ": missing required key '", key, "' (", spec->DescribeExpected(), ")"));
    }
  }
  for (const char* key : {"channels", "image_size", "conv_channels"}) {
    if (!cnn && merged->Get({key}) != nullptr) {
      errors.Add(merged->Where({key}), absl::StrCat(owner, ": '", key, "' is a key of family \"cnn\", not \"", family, "\""));
    }
  }
  for (const char* key : {"fanouts", "gnn_layer"}) {
    if (!gnn && merged->Get({key}) != nullptr) {
      errors.Add(merged->Where({key}), absl::StrCat(owner, ": '", key, "' is a key of family \"gnn\", not \"", family, "\""));
    }
  }
  if (cnn && merged->Get({"conv_channels"}) != nullptr &&
      Declared<std::vector<std::int64_t>>(p, "conv_channels", errors).empty()) {
    errors.Add(merged->Where({"conv_channels"}),
               absl::StrCat(owner, ": 'conv_channels' needs at least one entry (the output channels of each conv block)"));
  }
  if (errors.size() != before) return nullptr;
  ModelShape shape;
  shape.name = Declared<std::string>(p, "name", errors);
  shape.family = Declared<std::string>(p, "family", errors);
  shape.layers = Declared<std::int64_t>(p, "layers", errors);
  shape.decoder_layers = Declared<std::int64_t>(p, "decoder_layers", errors);
  shape.hidden = Declared<std::int64_t>(p, "hidden", errors);
  shape.heads = Declared<std::int64_t>(p, "heads", errors);
  shape.ffn_hidden = Declared<std::int64_t>(p, "ffn_hidden", errors);
  shape.seq_len = Declared<std::int64_t>(p, "seq_len", errors);
  shape.vocab = Declared<std::int64_t>(p, "vocab", errors);
  shape.experts = Declared<std::int64_t>(p, "experts", errors);
  shape.top_k = Declared<std::int64_t>(p, "top_k", errors);
  shape.tied_embeddings = Declared<bool>(p, "tied_embeddings", errors);
  shape.kv_heads = Declared<std::int64_t>(p, "kv_heads", errors);
  shape.ffn = Declared<std::string>(p, "ffn", errors);
  shape.attention = Declared<std::string>(p, "attention", errors);
  shape.positions = Declared<std::string>(p, "positions", errors);
  shape.inputs = Declared<std::int64_t>(p, "inputs", errors);
  shape.channels = Declared<std::int64_t>(p, "channels", errors);
  shape.image_size = Declared<std::int64_t>(p, "image_size", errors);
  shape.conv_channels = Declared<std::vector<std::int64_t>>(p, "conv_channels", errors);
  shape.fanouts = Declared<std::vector<std::int64_t>>(p, "fanouts", errors);
  shape.gnn_layer = Declared<std::string>(p, "gnn_layer", errors);
  if (const toml::node* list = merged->Get({"given"})) {
    const toml::array* arr = list->as_array();
    if (arr == nullptr) {
      errors.Add(merged->Where({"given"}), absl::StrCat(owner, ": 'given' must be an array of layer tables"));
    } else {
      for (size_t i = 0; i < arr->size(); ++i) {
        const KeyPath at = {"given", absl::StrCat("[", i, "]")};
        ParamSet lp = ResolveParams(*merged, at, GivenLayerSchema(), absl::StrCat(owner, " given[", i, "]"), {}, errors);
        shape.given.push_back(GivenFrom(lp, errors));
      }
    }
  }
  if (const std::string csv = Declared<std::string>(p, "given_csv", errors); !csv.empty()) {
    std::filesystem::path file(csv);
    if (file.is_relative()) file = std::filesystem::path(merged->Where({"given_csv"}).file).parent_path() / file;
    ReadGivenCsv(file, shape.given, errors);
  }
  if (given != !shape.given.empty()) {
    errors.Add(merged->Where({}), given ? absl::StrCat(owner, ": family \"layers\" needs 'given' layers or a 'given_csv' file")
                                        : absl::StrCat(owner, ": 'given' layers need family = \"layers\""));
  }
  if (errors.size() != before) return nullptr;
  if (shape.name.empty()) {
    const toml::node* preset = doc.Get([&] { KeyPath k = section; k.push_back("preset"); return k; }());
    shape.name = preset && preset->is_string() ? preset->as_string()->get() : std::string("model");
  }
  auto graph = BuildModelGraph(shape);
  if (!graph.ok()) {
    // A graph too large names the key that made it so; anything else the model's table.
    SourceLoc where = merged->Where({});
    if (graph.status().code() == absl::StatusCode::kResourceExhausted) {
      for (const char* key : {"layers", "given"}) {
        if (SourceLoc at = merged->Where({key}); !at.file.empty()) {
          where = at;
          break;
        }
      }
    }
    if (where.file.empty()) where = doc.Where(section);
    errors.Add(where, std::string(graph.status().message()));
    return nullptr;
  }
  return std::make_shared<const ModelGraph>(std::move(*graph));
}

}  // namespace testbed
