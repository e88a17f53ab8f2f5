// Route building: build a cluster and find the routes a ring over every device asks for
// (device i to i + 1), at 1,024 / 16,384 / 100,000 devices, in two shapes:
//   star:     one node of N devices behind one switch (the ASTRA-sim comparison's shape);
//   superpod: N / 8 DGX H100 nodes on the rail-optimised leaf/spine/core fabric.
// Each with routes found lazily (the default) and with every pair computed up front
// (routes = "all_pairs", the behaviour before lazy routing), in the same run. The reference
// is skipped, with its memory estimate as the reason, when it would not fit in half the
// free memory: the refusal users get instead of an out-of-memory kill. resident_MiB: what the
// process's resident memory grew by while the cluster and its routes were held.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "config/cluster_config.h"
#include "config/preset_library.h"
#include "memory_budget.h"

namespace testbed {
namespace {

const PresetLibrary& Presets() {
  static const PresetLibrary lib({std::filesystem::path(TESTBED_BENCH_CONFIG_DIR)});
  return lib;
}

std::string StarToml(int devices, bool all_pairs) {
  return absl::StrCat("[cluster]\nname = \"star\"\n", all_pairs ? "routes = \"all_pairs\"\n" : "",
                      "[cluster.node]\nname = \"star\"\ndevice = \"h100-sxm\"\ndevices = ", devices,
                      "\nhubs = [\"switch\"]\ndevice_links = [\"switch\", \"port\"]\n"
                      "[cluster.node.link_types]\nport = { bandwidth_gb_per_s = 400.0, latency_us = 0.936 }\n");
}

std::string SuperpodToml(int devices, bool all_pairs) {
  return absl::StrCat("[cluster]\npreset = \"h100-superpod\"\nnodes = ", devices / 8, "\n",
                      all_pairs ? "routes = \"all_pairs\"\n" : "");
}

void BuildAndRoute(benchmark::State& state, const std::string& toml) {
  auto doc = ConfigDoc::ParseString(toml, "bench");
  if (!doc.ok()) {
    state.SkipWithError(std::string(doc.status().message()).c_str());
    return;
  }
  std::size_t links = 0;
  int devices = 0;
  double grew_mib = 0;
  for (auto _ : state) {
    const double before = ResidentMiB();
    ErrorList errors;
    std::shared_ptr<const Cluster> cluster = ResolveCluster(*doc, {"cluster"}, Presets(), errors);
    if (!errors.empty() || cluster == nullptr) {
      state.SkipWithError(std::string(errors.ToStatus().message()).c_str());
      return;
    }
    devices = cluster->num_devices();
    links = 0;
    for (DeviceId d = 0; d < devices; ++d) links += cluster->Route(d, (d + 1) % devices).size();
    benchmark::DoNotOptimize(links);
    grew_mib = ResidentMiB() - before;  // the cluster and its routes, while still held
  }
  state.counters["devices"] = devices;
  state.counters["ring_links"] = static_cast<double>(links);
  state.counters["resident_MiB"] = grew_mib;
}

void BM_Star(benchmark::State& state) {
  BuildAndRoute(state, StarToml(static_cast<int>(state.range(0)), state.range(1) != 0));
}
void BM_Superpod(benchmark::State& state) {
  BuildAndRoute(state, SuperpodToml(static_cast<int>(state.range(0)), state.range(1) != 0));
}

// Arguments: devices, all_pairs (0: lazy, the default; 1: the former all-pairs table).
void Sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"devices", "all_pairs"});
  for (int devices : {1024, 16384, 100000}) {
    for (int all_pairs : {0, 1}) b->Args({devices, all_pairs});
  }
  b->Unit(benchmark::kMillisecond)->Iterations(1);
}
BENCHMARK(BM_Star)->Apply(Sizes);
BENCHMARK(BM_Superpod)->Apply(Sizes);

}  // namespace
}  // namespace testbed

BENCHMARK_MAIN();
