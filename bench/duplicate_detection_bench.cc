// BRGraph's duplicate detection (plugins/graph/brgraph): vertices classified per second on
// CPU threads, against the same classification by std::sort + std::set_intersection of the
// same ids, timed alternately in the same iterations. Batches of 2^18 distinct vertices of a
// 2^22-vertex graph against a resident set of as many, half of them shared (consecutive
// GraphSAGE batches on large graphs share about that). Reported: `vertices_per_s`,
// `reference_vertices_per_s` and `speedup_vs_sort`.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "duplicate_detection.h"

namespace {

using testbed::brgraph::Detection;
using testbed::brgraph::DuplicateDetector;
using Clock = std::chrono::steady_clock;

void BM_DuplicateDetection(benchmark::State& state) {
  constexpr std::int64_t kVertices = 1 << 22;
  constexpr size_t kBatch = 1 << 18;
  const int threads = static_cast<int>(state.range(0));
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<std::int64_t> any(0, kVertices - 1);
  // Resident: kBatch distinct ids; batch: half of them and half others.
  std::vector<std::int64_t> resident, batch;
  {
    std::vector<std::uint8_t> used(kVertices, 0);
    while (resident.size() < kBatch) {
      const std::int64_t v = any(rng);
      if (used[static_cast<size_t>(v)] == 0) {
        used[static_cast<size_t>(v)] = 1;
        resident.push_back(v);
      }
    }
    batch.assign(resident.begin(), resident.begin() + kBatch / 2);
    while (batch.size() < kBatch) {
      const std::int64_t v = any(rng);
      if (used[static_cast<size_t>(v)] == 0) {
        used[static_cast<size_t>(v)] = 2;
        batch.push_back(v);
      }
    }
    std::shuffle(batch.begin(), batch.end(), rng);
  }
  DuplicateDetector d(kVertices, threads);
  Detection out;
  double ours_s = 0, ref_s = 0, classified = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    if (!d.SetResident(resident).ok() || !d.Detect(batch, out).ok()) {
      state.SkipWithError("detection failed");
      return;
    }
    const auto t1 = Clock::now();
    std::vector<std::int64_t> a = resident, b = batch, both;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(both.data());
    if (both.size() != out.duplicates.size()) {
      state.SkipWithError("the detection and the reference disagree");
      return;
    }
    ours_s += std::chrono::duration<double>(t1 - t0).count();
    ref_s += std::chrono::duration<double>(t2 - t1).count();
    classified += static_cast<double>(kBatch);
  }
  state.counters["threads"] = threads;
  state.counters["vertices_per_s"] = classified / ours_s;
  state.counters["reference_vertices_per_s"] = classified / ref_s;
  state.counters["speedup_vs_sort"] = ref_s / ours_s;
}
BENCHMARK(BM_DuplicateDetection)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace
BENCHMARK_MAIN();
