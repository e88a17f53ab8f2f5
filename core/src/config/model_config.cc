#include "config/model_config.h"

#include "absl/strings/str_cat.h"

namespace testbed {

const std::vector<ParamSpec>& ModelSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::String("name", "").Doc("model name shown in tables"),
      ParamSpec::String("doc", "").Doc("one line about the model and where its shape comes from"),
      ParamSpec::Choice("family", "gpt", {"gpt", "bert", "moe-gpt", "mlp"})
          .Doc("causal GPT, bidirectional BERT, GPT with MoE FFNs, or an MLP classifier"),
      ParamSpec::Int("layers", 0).Min(1).Required().Unit("blocks").Doc("transformer blocks (mlp: hidden layers)"),
      ParamSpec::Int("hidden", 0).Min(1).Required().Unit("elements").Doc("hidden size h"),
      ParamSpec::Int("heads", 0).Min(0).Unit("heads").Doc("attention heads a (h divisible by a; transformers only)"),
      ParamSpec::Int("ffn_hidden", 0).Min(0).Unit("elements").Doc("FFN inner size; 0 means 4 x hidden"),
      ParamSpec::Int("seq_len", 1024).Min(1).Unit("tokens").Doc("sequence length s"),
      ParamSpec::Int("vocab", 50257).Min(1).Unit("tokens").Doc("vocabulary size V"),
      ParamSpec::Int("experts", 0).Min(0).Unit("experts").Doc("experts per MoE layer (0: dense)"),
      ParamSpec::Int("top_k", 1).Min(1).Unit("experts").Doc("experts each token is routed to"),
      ParamSpec::Bool("tied_embeddings", true).Doc("output head shares the embedding matrix"),
      ParamSpec::Int("inputs", 0).Min(0).Unit("features").Doc("mlp: input features"),
  };
  return schema;
}

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
  ParamSet p = ResolveParams(*merged, {}, ModelSchema(), absl::StrCat("[", PathToString(section), "]"), {}, errors);
  if (errors.size() != before) return nullptr;
  ModelShape shape;
  shape.name = Declared<std::string>(p, "name", errors);
  shape.family = Declared<std::string>(p, "family", errors);
  shape.layers = Declared<std::int64_t>(p, "layers", errors);
  shape.hidden = Declared<std::int64_t>(p, "hidden", errors);
  shape.heads = Declared<std::int64_t>(p, "heads", errors);
  shape.ffn_hidden = Declared<std::int64_t>(p, "ffn_hidden", errors);
  shape.seq_len = Declared<std::int64_t>(p, "seq_len", errors);
  shape.vocab = Declared<std::int64_t>(p, "vocab", errors);
  shape.experts = Declared<std::int64_t>(p, "experts", errors);
  shape.top_k = Declared<std::int64_t>(p, "top_k", errors);
  shape.tied_embeddings = Declared<bool>(p, "tied_embeddings", errors);
  shape.inputs = Declared<std::int64_t>(p, "inputs", errors);
  if (shape.name.empty()) {
    const toml::node* preset = doc.Get([&] { KeyPath k = section; k.push_back("preset"); return k; }());
    shape.name = preset && preset->is_string() ? preset->as_string()->get() : std::string("model");
  }
  auto graph = BuildModelGraph(shape);
  if (!graph.ok()) {
    errors.Add(merged->Where({}), std::string(graph.status().message()));
    return nullptr;
  }
  return std::make_shared<const ModelGraph>(std::move(*graph));
}

}  // namespace testbed
