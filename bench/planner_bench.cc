// Planning time of Merak's and AutoPipe's planners (the planner alone: candidates scored by
// the planners' own estimates, no simulator in the loop): GPT 20B on 64 RTX 3090 GPUs and
// GPT-3 175B on 1,024 A100 GPUs in DGX nodes. Targets: under 100 ms and under 1 s. Merak
// searches degrees and micro-batch size, partitions every candidate on the proxy graph and
// chooses its recomputation; AutoPipe partitions the sub-layers for given degrees (its
// dynamic programme plus the simulated search around the critical stage). Also AutoPipe
// against the DAPPLE-style and Piper-style planners at the deepest pipelines of
// autopipe_planning.toml, where one planning call is too short to time once.
#include <benchmark/benchmark.h>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "engine/plugin_loader.h"
#include "testbed/partitioner.h"

namespace testbed {
namespace {

struct World {
  Registry registry;
  PluginLoader loader{registry};
  std::unique_ptr<PresetLibrary> presets;
  World() {
    loader.LoadDirectories({TESTBED_BENCH_PLUGIN_DIR});
    presets = std::make_unique<PresetLibrary>(std::vector<std::filesystem::path>{TESTBED_BENCH_CONFIG_DIR});
  }
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> Make(const std::string& name, const std::map<std::string, ParamValue>& set = {}) {
    const ComponentEntry* entry = registry.Find(T::kKind, name);
    if (entry == nullptr) return absl::NotFoundError(absl::StrCat("no component ", name));
    ParamSet p;
    for (const ParamSpec& s : entry->decl.params) p.Set(s.name(), s.default_value());
    for (const auto& [k, v] : set) p.Set(k, v);
    return registry.Create<T>(name, p);
  }
};

World& TheWorld() {
  static World w;
  return w;
}

struct Setup {
  std::shared_ptr<const Cluster> cluster;
  std::shared_ptr<const ModelGraph> model;
  std::shared_ptr<DeviceModel> device_model;
  TrainSettings train;
  ParallelSettings parallel;
};

absl::StatusOr<Setup> MakeSetup(const std::string& cluster_toml, const std::string& model_preset, int tp, int pp,
                                std::int64_t global_batch) {
  World& w = TheWorld();
  ErrorList errors;
  auto cdoc = ConfigDoc::ParseString(cluster_toml, "bench");
  auto mdoc = ConfigDoc::ParseString(absl::StrCat("[model]\npreset = \"", model_preset, "\"\n"), "bench");
  if (!cdoc.ok() || !mdoc.ok()) return absl::InternalError("bench: bad preset text");
  Setup s;
  s.cluster = ResolveCluster(*cdoc, {"cluster"}, *w.presets, errors);
  s.model = ResolveModel(*mdoc, {"model"}, *w.presets, errors);
  if (!errors.empty()) return errors.ToStatus();
  auto dm = w.Make<DeviceModel>("roofline");
  if (!dm.ok()) return dm.status();
  s.device_model = *dm;
  s.train.global_batch = global_batch;
  s.train.micro_batch = 1;
  s.parallel.tp = tp;
  s.parallel.pp = pp;
  return s;
}

void Plan(benchmark::State& state, const std::string& partitioner, const std::map<std::string, ParamValue>& params,
          const std::string& cluster_toml, const std::string& model, int tp, int pp, std::int64_t global_batch) {
  auto setup = MakeSetup(cluster_toml, model, tp, pp, global_batch);
  if (!setup.ok()) {
    state.SkipWithError(std::string(setup.status().message()).c_str());
    return;
  }
  auto part = TheWorld().Make<Partitioner>(partitioner, params);
  if (!part.ok()) {
    state.SkipWithError(std::string(part.status().message()).c_str());
    return;
  }
  PlanningContext ctx{*setup->model, *setup->cluster, setup->train, setup->parallel, *setup->device_model, 1, {}};
  double tp_out = 0, pp_out = 0;
  for (auto _ : state) {
    auto plan = (*part)->Partition(ctx);
    if (!plan.ok()) {
      state.SkipWithError(std::string(plan.status().message()).c_str());
      return;
    }
    tp_out = plan->tp(0);
    pp_out = plan->pp();
    benchmark::DoNotOptimize(plan->stages.data());
  }
  state.counters["tp"] = tp_out;
  state.counters["pp"] = pp_out;
  state.counters["gpus"] = setup->cluster->num_devices();
}

const char kRtx64[] = "[cluster]\npreset = \"rtx3090-64\"\n";
const char kHpwnv16[] = "[cluster]\npreset = \"hpwnv-16\"\n";
const char kDgx1024[] = "[cluster]\npreset = \"dgx-a100\"\nnodes = 128\n";

void MerakGpt20b(benchmark::State& s) { Plan(s, "merak", {}, kRtx64, "gpt-20b", 1, 1, 512); }
void MerakGpt3(benchmark::State& s) { Plan(s, "merak", {}, kDgx1024, "gpt3-175b", 1, 1, 1536); }
void AutoPipeGpt20b(benchmark::State& s) { Plan(s, "autopipe", {}, kRtx64, "gpt-20b", 4, 8, 512); }
void AutoPipeGpt3(benchmark::State& s) { Plan(s, "autopipe", {}, kDgx1024, "gpt3-175b", 8, 16, 1536); }

void Gpt15bPp16(benchmark::State& s, const std::string& planner) { Plan(s, planner, {}, kHpwnv16, "gpt-1.5b", 1, 16, 256); }
void Bert39bPp16(benchmark::State& s, const std::string& planner) { Plan(s, planner, {}, kHpwnv16, "bert-3.9b", 1, 16, 256); }
BENCHMARK_CAPTURE(Gpt15bPp16, autopipe, "autopipe")->Name("compare/autopipe/gpt-1.5b/pp16")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Gpt15bPp16, dapple, "dapple")->Name("compare/dapple/gpt-1.5b/pp16")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Gpt15bPp16, piper, "piper")->Name("compare/piper/gpt-1.5b/pp16")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Bert39bPp16, autopipe, "autopipe")->Name("compare/autopipe/bert-3.9b/pp16")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Bert39bPp16, dapple, "dapple")->Name("compare/dapple/bert-3.9b/pp16")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Bert39bPp16, piper, "piper")->Name("compare/piper/bert-3.9b/pp16")->Unit(benchmark::kMicrosecond);

BENCHMARK(MerakGpt20b)->Name("merak/gpt-20b/64gpu")->Unit(benchmark::kMillisecond);
BENCHMARK(MerakGpt3)->Name("merak/gpt3-175b/1024gpu")->Unit(benchmark::kMillisecond);
BENCHMARK(AutoPipeGpt20b)->Name("autopipe/gpt-20b/64gpu")->Unit(benchmark::kMillisecond);
BENCHMARK(AutoPipeGpt3)->Name("autopipe/gpt3-175b/1024gpu")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace testbed

BENCHMARK_MAIN();
