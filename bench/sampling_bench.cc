// GraphSAGE neighbour sampling (testbed/train/neighbor_sampler.h) on an R-MAT graph: sampled
// edges per second, beside a reference timed alternately in the same iterations: reading as
// many neighbour ids at random positions of the same adjacency array (the memory traffic
// sampling cannot avoid). Reported: `sampled_edges_per_s`, `reference_edges_per_s` and
// `time_vs_reference`, the sampler's time over the reference's (what the per-target draw,
// the partial shuffle and the deduplication of the next hop cost on top). And an epoch of
// batches sampled on threads (parallel_sampler.h) against the same epoch on one thread,
// alternately in the same iterations: `threaded_edges_per_s` and `speedup_vs_one_thread`.
#include <benchmark/benchmark.h>

#include <chrono>

#include "testbed/train/neighbor_sampler.h"
#include "testbed/train/parallel_sampler.h"

namespace {

using namespace testbed::train;
using Clock = std::chrono::steady_clock;

void BM_SampleNeighbors(benchmark::State& state) {
  const std::int64_t vertices = state.range(0), batch = state.range(1);
  auto graph = GenerateRmat(vertices, 16 * vertices, RmatOptions{});
  if (!graph.ok()) {
    state.SkipWithError("R-MAT failed");
    return;
  }
  const std::vector<int> fanouts = {25, 10};
  std::vector<std::int64_t> all(static_cast<size_t>(vertices));
  for (std::int64_t v = 0; v < vertices; ++v) all[static_cast<size_t>(v)] = v;
  Rng rng(3), picks(4);
  double sample_s = 0, reference_s = 0, edges = 0;
  std::int64_t epoch = 0;
  std::vector<std::vector<std::int64_t>> batches;
  size_t next = 0;
  const auto& adj = graph->adjacency.neighbors;
  for (auto _ : state) {
    if (next == batches.size()) {
      batches = EpochBatches(all, batch, 1, epoch++);
      next = 0;
    }
    const auto t0 = Clock::now();
    auto sampled = SampleNeighbors(*graph, batches[next++], fanouts, rng);
    const auto t1 = Clock::now();
    const std::int64_t n = sampled->SampledEdges();
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += adj[picks.Below(adj.size())];
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(sum);
    sample_s += std::chrono::duration<double>(t1 - t0).count();
    reference_s += std::chrono::duration<double>(t2 - t1).count();
    edges += static_cast<double>(n);
  }
  state.counters["sampled_edges_per_s"] = edges / sample_s;
  state.counters["reference_edges_per_s"] = edges / reference_s;
  state.counters["time_vs_reference"] = sample_s / reference_s;
}
BENCHMARK(BM_SampleNeighbors)
    ->ArgNames({"vertices", "batch"})
    ->ArgsProduct({{1 << 16, 1 << 20}, {1024}})
    ->Unit(benchmark::kMillisecond);

void BM_SampleBatchesOnThreads(benchmark::State& state) {
  const std::int64_t vertices = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  auto graph = GenerateRmat(vertices, 16 * vertices, RmatOptions{});
  if (!graph.ok()) {
    state.SkipWithError("R-MAT failed");
    return;
  }
  std::vector<std::int64_t> all(static_cast<size_t>(vertices));
  for (std::int64_t v = 0; v < vertices; ++v) all[static_cast<size_t>(v)] = v;
  double one_s = 0, many_s = 0, edges = 0;
  std::int64_t epoch = 0;
  for (auto _ : state) {
    const auto batches = EpochBatches(all, 1024, 1, epoch);
    SamplingOptions o{{25, 10}, 1, epoch++, 1};
    const auto t0 = Clock::now();
    auto one = SampleBatches(*graph, batches, o);
    const auto t1 = Clock::now();
    o.threads = threads;
    auto many = SampleBatches(*graph, batches, o);
    const auto t2 = Clock::now();
    if (!one.ok() || !many.ok()) {
      state.SkipWithError("sampling failed");
      return;
    }
    for (const SampledBatch& b : *many) edges += static_cast<double>(b.SampledEdges());
    one_s += std::chrono::duration<double>(t1 - t0).count();
    many_s += std::chrono::duration<double>(t2 - t1).count();
  }
  state.counters["threads"] = threads;
  state.counters["threaded_edges_per_s"] = edges / many_s;
  state.counters["speedup_vs_one_thread"] = one_s / many_s;
}
BENCHMARK(BM_SampleBatchesOnThreads)
    ->ArgNames({"vertices", "threads"})
    ->ArgsProduct({{1 << 16}, {2, 4}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
BENCHMARK_MAIN();
