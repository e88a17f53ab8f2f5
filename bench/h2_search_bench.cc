// H2's HeteroAuto (plugins/parallel/h2): the two-stage search by the cost model (every order
// of the chip types, D and per-type TP; HeteroPP's split of each; the finalists' splits
// refined) for a 100B GPT (80 blocks, hidden 10240) on 64 to 16,384 chips of four types in
// equal numbers (8 per node, each type its own peak and memory, as in h2-1024), 1,024
// micro-batches per iteration. Target: under 10 s at 1,024 chips on one core. Reference in
// the same run: the core's homogeneous plan search (SearchPlans with Megatron-LM's uniform
// split and its analytic 1F1B estimate, the planner every baseline uses) on the same cluster,
// so `search_over_baseline` says what searching the heterogeneous space costs against the
// usual search. Counters: search_s, groupings, layouts, us_per_layout, baseline_s,
// search_over_baseline.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "hetero_search.h"
#include "testbed/plan_search.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace testbed;

// Compute time from FLOPs at 40% of the chip's FP16 peak.
class FlopsModel final : public DeviceModel {
 public:
  absl::StatusOr<double> ComputeLayerTime(const LayerWork& w, const DeviceSpec& d) const override {
    const double flops = w.phase == Phase::kBackward ? w.layer->bwd_flops_per_sample : w.layer->fwd_flops_per_sample;
    return flops * static_cast<double>(w.micro_batch) * w.fraction / w.tp / (0.4 * d.PeakFlops(Precision::kFp16));
  }
  absl::StatusOr<double> KernelTime(double, double, Precision, const DeviceSpec&) const override { return 0.0; }
};

NodeType Node(const std::string& chip, double tflops, double memory_gib, double fabric_gb) {
  NodeType type;
  type.name = chip + "-node";
  type.devices = 8;
  type.device.name = chip;
  type.device.vendor = chip;
  type.device.peak_flops[Precision::kFp32] = tflops * 1e12 / 4;
  type.device.peak_flops[Precision::kFp16] = tflops * 1e12;
  type.device.memory_bytes = static_cast<std::int64_t>(memory_gib * 1073741824.0);
  type.device.memory_bandwidth_bytes_per_s = 2e12;
  type.hubs = {"fabric", "cpu0"};
  const LinkSpec fabric{"fabric", LinkKind::kOther, fabric_gb * 1e9, 1e-6};
  const LinkSpec pcie{"pcie", LinkKind::kPcie, 63e9, 1e-6};
  for (int i = 0; i < 8; ++i) {
    type.links.push_back({"gpu" + std::to_string(i), "fabric", fabric});
    type.links.push_back({"gpu" + std::to_string(i), "cpu0", pcie});
  }
  type.nics = {"nic0"};
  type.links.push_back({"nic0", "cpu0", pcie});
  type.nic_link = LinkSpec{"rdma", LinkKind::kInfiniband, 25e9, 2e-6};
  return type;
}

void BM_HeteroAutoSearch(benchmark::State& state) {
  const int chips = static_cast<int>(state.range(0));
  const int nodes = chips / 4 / 8;  // per type
  ModelShape shape;
  shape.name = "gpt-100b";
  shape.layers = 80;
  shape.hidden = 10240;
  shape.heads = 80;
  shape.seq_len = 2048;
  shape.vocab = 51200;
  const ModelGraph model = *BuildModelGraph(shape);
  // The figures of h800, ascend-910b, mtt-s4000 and mi250x (configs/devices).
  const Cluster cluster = *Cluster::Build(
      "bench", {NodeGroup{Node("a", 989.4, 80, 200), nodes}, NodeGroup{Node("b", 313, 64, 196), nodes},
                NodeGroup{Node("c", 100, 48, 120), nodes}, NodeGroup{Node("d", 383, 128, 200), nodes}});
  FlopsModel dm;
  TrainSettings train;
  train.global_batch = 1024;
  train.micro_batch = 1;
  ParallelSettings parallel;
  parallel.recompute = RecomputeMode::kFull;
  const PlanningContext ctx{model, cluster, train, parallel, dm, 0, {}};
  double search_s = 0, groupings = 0, layouts = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto cost = h2::CostModel::Make(ctx, h2::ChipTypes(cluster));
    auto found = h2::SearchLayouts(*cost, h2::SearchOptions{});
    search_s += std::chrono::duration<double>(Clock::now() - t0).count();
    if (!found.ok()) {
      state.SkipWithError(std::string(found.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(found->finalists.front().estimate.iteration_s);
    groupings = static_cast<double>(found->groupings);
    layouts = static_cast<double>(found->layouts);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["search_s"] = search_s / n;
  state.counters["groupings"] = groupings;
  state.counters["layouts"] = layouts;
  state.counters["us_per_layout"] = layouts > 0 ? search_s / n / layouts * 1e6 : 0;
  // The baseline's search on the same cluster, timed once.
  const auto t0 = Clock::now();
  SearchSpace space = DefaultSearchSpace(ctx);
  space.recompute = {RecomputeMode::kFull};
  auto base = SearchPlans(ctx, space, [&](int pp, int chunks) { return UniformBlockStages(model, pp * chunks); });
  const double baseline_s = std::chrono::duration<double>(Clock::now() - t0).count();
  benchmark::DoNotOptimize(base.ok());
  state.counters["baseline_s"] = baseline_s;
  state.counters["search_over_baseline"] = baseline_s > 0 ? search_s / n / baseline_s : 0;
}
BENCHMARK(BM_HeteroAutoSearch)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Arg(16384)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
