// Oases' planner (plugins/parallel/oases): measuring the ops' costs and solving the chain's
// integer program exactly, for H = 12288, L = 4 on 32 GPUs (8 nodes of 4; one sample per GPU
// per micro-batch) and for a 96-layer model (H = 4096; one sample per 8 GPUs, so that it fits
// in 80 GB under the planner's memory model) on 64 GPUs (targets: both under 1 s). Reference in the same run: brute
// force over every per-op degree assignment of the 4-layer problem (5^8 assignments), so
// `solve_over_brute_force` says what the exact labelling saves; for 96 layers brute force
// (7^192) is out of reach and the counters give the time and the labels kept. Counters:
// plan_ms (costs + solve), solve_ms, brute_force_ms, solve_over_brute_force, labels.
#include <benchmark/benchmark.h>

#include <chrono>
#include <limits>
#include <string>

#include "chain_solver.h"
#include "op_costs.h"
#include "testbed/partitioner.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace testbed;

// Compute time from FLOPs at 35 TFLOP/s (what the planner reads does not change its work).
class FlopsModel final : public DeviceModel {
 public:
  absl::StatusOr<double> ComputeLayerTime(const LayerWork& w, const DeviceSpec&) const override {
    const double flops = w.phase == Phase::kBackward ? w.layer->bwd_flops_per_sample : w.layer->fwd_flops_per_sample;
    return 20e-6 + flops * static_cast<double>(w.micro_batch) * w.fraction / w.tp / 35e12;
  }
  absl::StatusOr<double> KernelTime(double, double, Precision, const DeviceSpec&) const override { return 0.0; }
};

Cluster Nodes(int nodes) {
  NodeType type;
  type.name = "four";
  type.devices = 4;
  type.device.name = "gpu";
  type.device.peak_flops[Precision::kFp16] = 71e12;
  type.device.memory_bytes = 80LL << 30;
  type.device.memory_bandwidth_bytes_per_s = 936e9;
  type.hubs = {"cpu0"};
  const LinkSpec pcie{"pcie", LinkKind::kPcie, 16e9, 1e-6};
  for (int i = 0; i < 4; ++i) type.links.push_back({"gpu" + std::to_string(i), "cpu0", pcie});
  type.nics = {"nic0"};
  type.links.push_back({"nic0", "cpu0", pcie});
  type.nic_link = LinkSpec{"ib", LinkKind::kInfiniband, 12.5e9, 2e-6};
  return *Cluster::Build("bench", {NodeGroup{type, nodes}});
}

double BruteForce(const oases::ChainProblem& p) {
  std::vector<int> c(static_cast<size_t>(p.ops), 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    if (oases::AssignmentMemory(p, c) <= p.budget) best = std::min(best, oases::AssignmentCost(p, c));
    int i = p.ops - 1;
    while (i >= 0 && ++c[static_cast<size_t>(i)] == p.choices) c[static_cast<size_t>(i--)] = 0;
    if (i < 0) break;
  }
  return best;
}

void BM_OasesPlanning(benchmark::State& state) {
  const int layers = static_cast<int>(state.range(0)), devices = static_cast<int>(state.range(1));
  const std::int64_t hidden = state.range(2);
  const int group = static_cast<int>(state.range(3));  // devices sharing one sample
  ModelShape shape;
  shape.name = "gpt";
  shape.layers = layers;
  shape.hidden = hidden;
  shape.heads = hidden / 64;
  shape.seq_len = 1024;
  shape.vocab = 50257;
  const ModelGraph model = *BuildModelGraph(shape);
  const Cluster cluster = Nodes(devices / 4);
  FlopsModel dm;
  TrainSettings train;
  ParallelSettings parallel;
  const PlanningContext ctx{model, cluster, train, parallel, dm, 0, {}};
  GridSpec g;
  g.tp = group;
  g.dp = devices / group;
  g.micro_batch = 1;
  g.chunks = UniformStages(static_cast<int>(model.layers.size()), 1);
  const Plan plan = GridPlan(g);
  double plan_s = 0, solve_s = 0, labels = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto costs = oases::MeasureOps(ctx, plan, oases::CostSettings{});
    const oases::ChainProblem p = oases::BuildProblem(*costs, true);
    const auto t1 = Clock::now();
    auto sol = oases::SolveChain(p);
    const auto t2 = Clock::now();
    if (!sol.ok()) {
      state.SkipWithError(std::string(sol.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(sol->cost);
    plan_s += std::chrono::duration<double>(t2 - t0).count();
    solve_s += std::chrono::duration<double>(t2 - t1).count();
    labels = static_cast<double>(sol->labels);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["plan_ms"] = plan_s / n * 1e3;
  state.counters["solve_ms"] = solve_s / n * 1e3;
  state.counters["labels"] = labels;
  if (layers <= 4) {
    auto costs = oases::MeasureOps(ctx, plan, oases::CostSettings{});
    const oases::ChainProblem p = oases::BuildProblem(*costs, true);
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(BruteForce(p));
    const double brute = std::chrono::duration<double>(Clock::now() - t0).count();
    state.counters["brute_force_ms"] = brute * 1e3;
    state.counters["solve_over_brute_force"] = solve_s / n / brute;
  }
}
BENCHMARK(BM_OasesPlanning)->Args({4, 32, 12288, 1})->Args({96, 64, 4096, 8})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
