#include "config/run_config.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "config/cluster_config.h"
#include "config/model_config.h"
#include "engine/backend.h"

namespace testbed {

const std::vector<ParamSpec>& ExperimentSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::String("name", "").Required().Doc("experiment name; also the default results file name"),
      ParamSpec::String("paper", "").Doc("the paper and figure or table this reproduces"),
      ParamSpec::String("doc", "").Doc("what the experiment shows"),
      ParamSpec::String("backend", "sim").Doc("plan | sim | real"),
      ParamSpec::Int("seed", 1).Min(0).Doc("base seed; each sweep point derives its own from it"),
      ParamSpec::String("output", "").Doc("results file (default results/<name>.h5)"),
      ParamSpec::String("metric", "").Doc("main metric of the table (default: the backend's)"),
      ParamSpec::String("reference_metric", "speedup")
          .Doc("what [reference] figures are compared with: 'speedup' or a metric name"),
      ParamSpec::StringList("columns", {}).Doc("more metrics shown beside `metric` in the console table"),
      ParamSpec::Choice("timeline", "auto", {"auto", "on", "off"})
          .Doc("record each run's task timeline (auto: when it is small)"),
  };
  return schema;
}

const std::vector<ParamSpec>& TrainSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::Int("global_batch", 0).Range(0, 2147483647).Unit("samples").Doc("samples per iteration over all replicas (0: micro_batch x micro_batches x dp)"),
      ParamSpec::Int("micro_batch", 1).Range(1, 1 << 20).Unit("samples").Doc("samples per micro-batch"),
      ParamSpec::Int("micro_batches", 0).Range(0, 1 << 24).Unit("micro-batches").Doc("per replica when global_batch is 0 (0: 1)"),
      ParamSpec::Choice("precision", "fp16", {"fp32", "tf32", "fp16", "bf16", "fp8"})
          .Doc("training precision of matrix work (fp8: Transformer Engine's FP8 GEMMs in linear layers, BF16 elsewhere)"),
      ParamSpec::Int("fp8_amax_history", 1024).Range(1, 1 << 20).Unit("steps")
          .Doc("fp8: length of each FP8 tensor's amax history (delayed scaling's state, fp32)"),
      ParamSpec::Choice("optimizer", "adam", {"adam", "sgd"}).Doc("adam: mixed-precision Adam, 16 bytes of state per parameter"),
      ParamSpec::Int("steps", 1).Range(1, 1 << 24).Unit("iterations").Doc("iterations to simulate or train"),
      ParamSpec::Double("learning_rate", 1e-3).Min(0).Doc("optimizer step size"),
      ParamSpec::Bool("optimizer_step", true).Doc("false: an iteration ends with the gradient exchange (no optimizer kernel)"),
  };
  return schema;
}

const std::vector<ParamSpec>& ParallelSchema() {
  static const std::vector<ParamSpec> schema = {
      ParamSpec::Int("tp", 1).Range(1, 1 << 20).Unit("devices").Doc("tensor-parallel degree"),
      ParamSpec::Int("pp", 1).Range(1, 1 << 20).Unit("stages").Doc("pipeline-parallel degree"),
      ParamSpec::Int("dp", 0).Range(0, 1 << 24).Unit("replicas").Doc("data-parallel degree (0: devices / (tp x pp))"),
      ParamSpec::Int("virtual_stages", 1).Range(1, 1 << 20).Unit("chunks").Doc("model chunks per pipeline stage (interleaved 1F1B)"),
      ParamSpec::Choice("recompute", "none", {"none", "full", "selective"}).Doc("activation recomputation"),
      ParamSpec::Bool("sequence_parallel", false).Doc("Megatron sequence parallelism alongside TP"),
      ParamSpec::Int("zero_stage", 0).Range(0, 3).Doc("ZeRO sharding of optimizer state (1), gradients (2), parameters (3)"),
      ParamSpec::Int("ep", 1).Range(1, 1 << 24).Unit("ranks").Doc("expert-parallel degree: data-parallel replicas sharing one set of experts (MoE)"),
      ParamSpec::Int("cp", 1).Range(1, 1 << 16).Unit("ranks").Doc("context-parallel degree: replicas splitting each sequence; dp = devices / (tp x pp x cp)"),
      ParamSpec::Choice("cp_comm", "all_gather", {"all_gather", "ring"})
          .Doc("context-parallel attention: keys and values all-gathered, or passed around the group in a ring overlapping the attention steps"),
  };
  return schema;
}

namespace {

void Record(ResolvedRun& run, const std::string& prefix, const ParamSet& params) {
  for (const auto& [k, v] : params.values()) run.recorded.emplace_back(absl::StrCat(prefix, ".", k), v);
}

// "<plugin> <library file>" of a component, or "core" for a built-in one.
std::string ComponentLibrary(const ComponentEntry& entry) {
  if (entry.library_path.empty()) return entry.plugin.empty() ? std::string("core") : entry.plugin;
  std::error_code ec;
  const std::filesystem::path full = std::filesystem::weakly_canonical(entry.library_path, ec);
  return absl::StrCat(entry.plugin, " ", ec ? entry.library_path : full.string());
}

RecomputeMode RecomputeFrom(const std::string& s) {
  if (s == "full") return RecomputeMode::kFull;
  if (s == "selective") return RecomputeMode::kSelective;
  return RecomputeMode::kNone;
}

ExperimentMeta MetaFrom(const ParamSet& p, ErrorList& errors) {
  ExperimentMeta m;
  m.name = Declared<std::string>(p, "name", errors);
  m.paper = Declared<std::string>(p, "paper", errors);
  m.doc = Declared<std::string>(p, "doc", errors);
  m.backend = Declared<std::string>(p, "backend", errors);
  m.seed = Declared<std::int64_t>(p, "seed", errors);
  m.output = Declared<std::string>(p, "output", errors);
  if (m.output.empty()) m.output = absl::StrCat("results/", m.name, ".h5");
  m.metric = Declared<std::string>(p, "metric", errors);
  m.reference_metric = Declared<std::string>(p, "reference_metric", errors);
  m.columns = Declared<std::vector<std::string>>(p, "columns", errors);
  m.timeline = Declared<std::string>(p, "timeline", errors);
  return m;
}

}  // namespace

absl::StatusOr<ExperimentMeta> ResolveMeta(const ConfigDoc& doc) {
  ErrorList errors;
  if (doc.GetTable({"experiment"}) == nullptr) {
    errors.Add(doc.Where({}), "missing [experiment] table (name, backend, ...)");
    return errors.ToStatus();
  }
  ParamSet p = ResolveParams(doc, {"experiment"}, ExperimentSchema(), "[experiment]", {}, errors);
  if (!errors.empty()) return errors.ToStatus();
  ExperimentMeta m = MetaFrom(p, errors);
  const BackendInfo* backend = FindBackendInfo(m.backend);
  if (backend == nullptr) {
    std::vector<std::string> names;
    for (const auto& [n, f] : BuiltinBackends()) names.push_back(n);
    errors.Add(doc.Where({"experiment", "backend"}), absl::StrCat("[experiment] 'backend': expected one of ",
                                                                  absl::StrJoin(names, ", "), ", got \"",
                                                                  m.backend, "\""));
    return errors.ToStatus();
  }
  if (m.metric.empty()) m.metric = backend->default_metric;
  return m;
}

absl::Status CheckFileSettings(const ConfigDoc& doc, const Registry& registry) {
  ErrorList errors;
  for (auto&& [k, v] : doc.root()) {
    const std::string key(k.str());
    const auto kind = KindFromName(key);
    if (!kind) continue;
    std::string name;
    KeyPath param_path;
    if (auto s = v.value_exact<std::string>()) {
      name = *s;
    } else if (const toml::table* t = v.as_table(); t != nullptr && t->get("use") && t->get("use")->is_string()) {
      name = t->get("use")->as_string()->get();
      param_path = {key};
    } else {
      continue;  // a malformed choice: the runs that use it say so
    }
    const ComponentEntry* entry = registry.Find(*kind, name);
    if (entry == nullptr) {
      errors.Add(doc.Where({key}), absl::StrCat("unknown ", key, " '", name, "'; available: ", registry.NamesOf(*kind),
                                                " (checked although the arms or the sweep override it)"));
      continue;
    }
    if (!param_path.empty()) {
      (void)ResolveParams(doc, param_path, entry->decl.params, absl::StrCat(key, " '", name, "'"), {"use"}, errors);
    }
  }
  // The file's own sections, key by key (type, range, unknown keys), whatever overrides them;
  // the checks a whole section needs (required keys, presets) are the runs'.
  std::vector<std::pair<std::string, std::pair<const std::vector<ParamSpec>*, std::set<std::string>>>> sections = {
      {"train", {&TrainSchema(), {}}},
      {"parallel", {&ParallelSchema(), {}}},
      {"model", {&ModelSchema(), {"preset", "given"}}},
      {"cluster", {&ClusterSchema(), {"preset", "node", "groups", "network"}}},
  };
  if (auto meta = ResolveMeta(doc); meta.ok()) {
    for (const auto& [name, specs] : FindBackendInfo(meta->backend)->sections) sections.push_back({name, {&specs, {}}});
  }
  for (const auto& [name, schema] : sections) {
    const toml::node* table = doc.Get({name});
    if (table == nullptr || !table->is_table()) continue;  // absent, or malformed: the runs say so
    (void)ResolveParams(doc, {name}, *schema.first, absl::StrCat("[", name, "]"), schema.second, errors);
  }
  return errors.ToStatus();
}

absl::StatusOr<ResolvedRun> ResolveRun(const RunSpec& spec, const Registry& registry, const PresetLibrary& presets) {
  const ConfigDoc& doc = spec.doc;
  auto meta = ResolveMeta(doc);
  if (!meta.ok()) return meta.status();
  const BackendInfo& backend = *FindBackendInfo(meta->backend);

  ResolvedRun run;
  run.spec = spec;
  run.meta = *meta;
  run.seed = StableHash(spec.point, static_cast<std::uint64_t>(meta->seed));
  ErrorList errors;

  // Root keys: core sections, kinds, backend sections.
  for (auto&& [k, v] : doc.root()) {
    const std::string key(k.str());
    if (std::find(CoreSectionNames().begin(), CoreSectionNames().end(), key) != CoreSectionNames().end()) continue;
    if (backend.sections.count(key)) continue;
    if (auto kind = KindFromName(key)) {
      if (std::none_of(backend.kinds.begin(), backend.kinds.end(), [&](const KindUse& u) { return u.kind == *kind; })) {
        std::vector<std::string> used;
        for (const KindUse& u : backend.kinds) used.emplace_back(KindName(u.kind));
        errors.Add(doc.Where({key}), absl::StrCat("'", key, "': backend '", backend.name, "' uses no ", key,
                                                  "; it uses: ", absl::StrJoin(used, ", ")));
      }
      continue;
    }
    std::vector<std::string> allowed = CoreSectionNames();
    for (const KindUse& u : backend.kinds) allowed.emplace_back(KindName(u.kind));
    for (const auto& [s, specs] : backend.sections) allowed.push_back(s);
    std::string msg = absl::StrCat("unknown key '", key, "'");
    if (auto guess = DidYouMean(key, allowed); !guess.empty()) absl::StrAppend(&msg, " (did you mean '", guess, "'?)");
    absl::StrAppend(&msg, "; expected one of: ", absl::StrJoin(allowed, ", "));
    errors.Add(doc.Where({key}), msg);
  }

  ParamSet train = ResolveParams(doc, {"train"}, TrainSchema(), "[train]", {}, errors);
  run.train.global_batch = Declared<std::int64_t>(train, "global_batch", errors);
  run.train.micro_batch = Declared<std::int64_t>(train, "micro_batch", errors);
  run.train.micro_batches = Declared<std::int64_t>(train, "micro_batches", errors);
  run.train.precision = PrecisionFromName(Declared<std::string>(train, "precision", errors)).value_or(Precision::kFp16);
  run.train.fp8_amax_history = static_cast<int>(Declared<std::int64_t>(train, "fp8_amax_history", errors));
  run.train.optimizer = Declared<std::string>(train, "optimizer", errors);
  run.train.steps = Declared<std::int64_t>(train, "steps", errors);
  run.train.learning_rate = Declared<double>(train, "learning_rate", errors);
  run.train.optimizer_step = Declared<bool>(train, "optimizer_step", errors);
  Record(run, "train", train);

  ParamSet par = ResolveParams(doc, {"parallel"}, ParallelSchema(), "[parallel]", {}, errors);
  run.parallel.tp = static_cast<int>(Declared<std::int64_t>(par, "tp", errors));
  run.parallel.pp = static_cast<int>(Declared<std::int64_t>(par, "pp", errors));
  run.parallel.dp = static_cast<int>(Declared<std::int64_t>(par, "dp", errors));
  run.parallel.virtual_stages = static_cast<int>(Declared<std::int64_t>(par, "virtual_stages", errors));
  run.parallel.recompute = RecomputeFrom(Declared<std::string>(par, "recompute", errors));
  run.parallel.sequence_parallel = Declared<bool>(par, "sequence_parallel", errors);
  run.parallel.zero_stage = static_cast<int>(Declared<std::int64_t>(par, "zero_stage", errors));
  run.parallel.ep = static_cast<int>(Declared<std::int64_t>(par, "ep", errors));
  run.parallel.cp = static_cast<int>(Declared<std::int64_t>(par, "cp", errors));
  run.parallel.cp_ring = Declared<std::string>(par, "cp_comm", errors) == "ring";
  Record(run, "parallel", par);

  for (const auto& [section, specs] : backend.sections) {
    ParamSet p = ResolveParams(doc, {section}, specs, absl::StrCat("[", section, "]"), {}, errors);
    Record(run, section, p);
    run.sections[section] = std::move(p);
  }

  if (backend.needs_cluster) {
    run.cluster = ResolveCluster(doc, {"cluster"}, presets, errors);
    if (run.cluster) {
      run.recorded.emplace_back("cluster.name", run.cluster->name());
      run.recorded.emplace_back("cluster.devices", static_cast<std::int64_t>(run.cluster->num_devices()));
    }
  }
  if (const toml::node* c = doc.Get({"cluster", "preset"}); c && c->is_string()) {
    run.recorded.emplace_back("cluster.preset", c->as_string()->get());
  }
  // A traced workload stands for the model.
  std::string workload_key;
  for (const std::string& key : backend.workload_keys) {
    const toml::node* w = doc.Get({"workload", key});
    if (w != nullptr && w->is_string() && !w->as_string()->get().empty()) workload_key = key;
  }
  if (!workload_key.empty() && doc.Get({"model"}) != nullptr) {
    errors.Add(doc.Where({"model"}), absl::StrCat("[model] and [workload] ", workload_key,
                                                  " both describe the job: keep one"));
  }
  if (backend.needs_model && workload_key.empty()) {
    run.model = ResolveModel(doc, {"model"}, presets, errors);
    if (run.model) {
      const ModelShape& m = run.model->shape;
      run.recorded.emplace_back("model.name", m.name);
      for (auto [k, v] : {std::pair{"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads},
                          {"ffn_hidden", m.ffn_hidden}, {"seq_len", m.seq_len}, {"vocab", m.vocab},
                          {"experts", m.experts}, {"top_k", m.top_k}}) {
        run.recorded.emplace_back(absl::StrCat("model.", k), v);
      }
      run.recorded.emplace_back("model.params", run.model->TotalParams());
    }
  }
  if (const toml::node* c = doc.Get({"model", "preset"}); c && c->is_string()) {
    run.recorded.emplace_back("model.preset", c->as_string()->get());
  }

  // Components: the run's choice, else the backend's default.
  for (const KindUse& use : backend.kinds) {
    const std::string kind_name(KindName(use.kind));
    const toml::node* node = doc.Get({kind_name});
    std::string name;
    KeyPath param_path;
    if (node == nullptr) {
      if (use.default_component.empty()) {
        if (use.required) {
          errors.Add(doc.Where({}), absl::StrCat("no ", kind_name, " chosen: set ", kind_name,
                                                 " = \"...\" in the arm or at the top of the file; available: ",
                                                 registry.NamesOf(use.kind)));
        }
        continue;
      }
      name = use.default_component;
    } else if (auto s = node->value_exact<std::string>()) {
      name = *s;
    } else if (const toml::table* t = node->as_table()) {
      const toml::node* u = t->get("use");
      if (u == nullptr || !u->is_string()) {
        errors.Add(doc.Where({kind_name}), absl::StrCat("'", kind_name, "': a table needs use = \"<component>\""));
        continue;
      }
      name = u->as_string()->get();
      param_path = {kind_name};
    } else {
      errors.Add(doc.Where({kind_name}), absl::StrCat("'", kind_name, "': expected a component name or { use = ... }"));
      continue;
    }
    const ComponentEntry* entry = registry.Find(use.kind, name);
    if (entry == nullptr) {
      std::string msg = absl::StrCat("unknown ", kind_name, " '", name, "'");
      std::vector<std::string> names;
      for (const ComponentEntry* e : registry.List(use.kind)) names.push_back(e->decl.name);
      if (auto guess = DidYouMean(name, names); !guess.empty()) absl::StrAppend(&msg, " (did you mean '", guess, "'?)");
      absl::StrAppend(&msg, "; available: ", registry.NamesOf(use.kind));
      errors.Add(doc.Where({kind_name}), msg);
      continue;
    }
    ComponentChoice choice;
    choice.name = name;
    const std::string owner = absl::StrCat(kind_name, " '", name, "'");
    if (param_path.empty()) {
      ConfigDoc empty;
      choice.params = ResolveParams(empty, {"none"}, entry->decl.params, owner, {}, errors);
    } else {
      choice.params = ResolveParams(doc, param_path, entry->decl.params, owner, {"use"}, errors);
    }
    run.recorded.emplace_back(kind_name, name);
    run.recorded.emplace_back(absl::StrCat(kLibraryKeyPrefix, kind_name), ComponentLibrary(*entry));
    Record(run, kind_name, choice.params);
    run.components[use.kind] = std::move(choice);
  }

  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("run '", spec.id, "':\n", errors.ToStatus().message()));
  }
  run.config_toml = doc.ToToml();
  run.config_hash = absl::StrFormat("%016x", StableHash(run.config_toml));
  return run;
}

}  // namespace testbed
