// Simulator speed: one training iteration of GPT-3 175B (TP 8 x PP 16 x DP 8 on 1,024 A100s
// in DGX nodes, 64 micro-batches, 1F1B, full task graph), and how the wall time grows with the
// cluster (64, 1,024, 8,192 GPUs at the same per-replica work). Counters: tasks simulated,
// tasks per second, and the share of time spent building the schedule.
#include <benchmark/benchmark.h>

#include <chrono>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "engine/plugin_loader.h"
#include "expand/replica_copy.h"
#include "sim/simulator.h"
#include "testbed/pipeline_program.h"

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
  std::shared_ptr<T> Make(const std::string& name) {
    ParamSet p;
    for (const ParamSpec& s : registry.Find(T::kKind, name)->decl.params) p.Set(s.name(), s.default_value());
    return *registry.Create<T>(name, p);
  }
};

World& TheWorld() {
  static World w;
  return w;
}

void SimulateGpt3(benchmark::State& state, int nodes, int tp, int pp, int dp, int micro_batches, RateUpdates rates,
                  bool copy_replicas = true) {
  World& w = TheWorld();
  ErrorList errors;
  auto cdoc = ConfigDoc::ParseString(absl::StrCat("[cluster]\npreset = \"dgx-a100\"\nnodes = ", nodes, "\n"), "bench");
  auto cluster = ResolveCluster(*cdoc, {"cluster"}, *w.presets, errors);
  auto mdoc = ConfigDoc::ParseString("[model]\npreset = \"gpt3-175b\"\n", "bench");
  auto model = ResolveModel(*mdoc, {"model"}, *w.presets, errors);
  if (!errors.empty()) {
    state.SkipWithError(std::string(errors.ToStatus().message()).c_str());
    return;
  }
  auto dm = w.Make<DeviceModel>("roofline");
  auto coll = w.Make<Collective>("auto");
  GridSpec grid;
  grid.tp = tp;
  grid.pp = pp;
  grid.dp = dp;
  grid.micro_batch = 1;
  grid.micro_batches = micro_batches;
  grid.recompute = RecomputeMode::kFull;
  // Megatron's split: blocks evenly over stages, embedding first, head last.
  const int blocks = model->NumBlocks();
  grid.chunks = UniformStages(blocks, pp);
  for (size_t i = 0; i < grid.chunks.size(); ++i) {
    StageSpec& st = grid.chunks[i];
    const int fb = st.first_layer, eb = st.end_layer;
    st.first_layer = i == 0 ? 0 : 1 + 2 * fb;
    st.end_layer = i + 1 == grid.chunks.size() ? static_cast<int>(model->layers.size()) : 1 + 2 * eb;
    st.recompute_layers = st.end_layer - st.first_layer;
  }
  const Plan plan = GridPlan(grid);
  TrainSettings train;
  double tasks = 0, build_s = 0, sim_s = 0, iteration = 0;
  expand::SetReplicaCopy(copy_replicas);
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    SchedulingContext ctx{*model, *cluster, plan, train, *dm};
    auto schedule = ExpandPipeline(ctx, OneFOneBProgram(pp, micro_batches), ExpandOptions{});
    const auto t1 = std::chrono::steady_clock::now();
    SimInputs in{*model, *cluster, *dm, *coll};
    SimOptions opt;
    opt.rate_updates = rates;
    auto r = Simulate(*schedule, in, opt);
    const auto t2 = std::chrono::steady_clock::now();
    if (!schedule.ok() || !r.ok()) {
      state.SkipWithError("simulation failed");
      return;
    }
    tasks = static_cast<double>(schedule->size());
    build_s += std::chrono::duration<double>(t1 - t0).count();
    sim_s += std::chrono::duration<double>(t2 - t1).count();
    iteration = r->iteration_time_s;
  }
  expand::SetReplicaCopy(true);
  const double n = static_cast<double>(state.iterations());
  state.counters["gpus"] = tp * pp * dp;
  state.counters["tasks"] = tasks;
  state.counters["tasks_per_s"] = benchmark::Counter(tasks * n, benchmark::Counter::kIsRate);
  state.counters["build_share"] = build_s / (build_s + sim_s);
  state.counters["simulated_iteration_s"] = iteration;
}

// 1,024 GPUs: TP 8 x PP 16 x DP 8, 64 micro-batches per replica. Each case twice: transfer
// rates updated over the changed links only (the engine) and over every link of every
// affected transfer (RateUpdates::kFull, the former engine), same results.
constexpr RateUpdates kInc = RateUpdates::kIncremental, kFull = RateUpdates::kFull;
BENCHMARK_CAPTURE(SimulateGpt3, gpus_1024, 128, 8, 16, 8, 64, kInc)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(SimulateGpt3, gpus_1024_full_rates, 128, 8, 16, 8, 64, kFull)->Unit(benchmark::kMillisecond)->MinTime(2.0);
// ... and with every data-parallel replica walked by the expander rather than copied from the
// first (expand/replica_copy.h): the same schedule, built the former way.
BENCHMARK_CAPTURE(SimulateGpt3, gpus_1024_walked, 128, 8, 16, 8, 64, kInc, false)->Unit(benchmark::kMillisecond)->MinTime(2.0);
// Scaling at the same per-replica work: 64 GPUs (DP 1 with PP 8), 8,192 GPUs (DP 64).
BENCHMARK_CAPTURE(SimulateGpt3, gpus_64, 8, 8, 8, 1, 64, kInc)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK_CAPTURE(SimulateGpt3, gpus_64_full_rates, 8, 8, 8, 1, 64, kFull)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK_CAPTURE(SimulateGpt3, gpus_8192, 1024, 8, 16, 64, 64, kInc)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(SimulateGpt3, gpus_8192_full_rates, 1024, 8, 16, 64, 64, kFull)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(SimulateGpt3, gpus_8192_walked, 1024, 8, 16, 64, 64, kInc, false)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace testbed

BENCHMARK_MAIN();
