// Encode and decode throughput of the gradient compressors (none, topk, s2reducer, casq) on a
// 16M-value float32 gradient with 1%, 10% or 100% non-zeros, single thread, CPU. Each result
// carries `vs_memcpy`: its gradient bytes per second over the bandwidth of a plain memcpy of
// the same 64 MiB measured in this run (best of 10), so numbers compare across machines.
// Decode is of one rank's payload (for all-gathered payloads the work grows with the ranks).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <vector>

#include "casq_compressor.h"
#include "dense_compressor.h"
#include "s2reducer_compressor.h"
#include "topk_compressor.h"

namespace testbed {
namespace {

constexpr std::int64_t kElements = 16 * 1024 * 1024;

// This thread's CPU time: rates below are per CPU second, as Google Benchmark's are, so a
// loaded machine slows the reference and the measured code alike.
double ThreadSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// CPU seconds per byte of a single-threaded memcpy of kElements floats, best of 10 copies.
double MemcpySecondsPerByte() {
  static const double seconds_per_byte = [] {
    std::vector<float> src(kElements, 1.0f), dst(kElements, 0.0f);
    double best = 1e30;
    for (int i = 0; i < 10; ++i) {
      const double t0 = ThreadSeconds();
      std::memcpy(dst.data(), src.data(), kElements * sizeof(float));
      benchmark::DoNotOptimize(dst.data());
      benchmark::ClobberMemory();
      best = std::min(best, ThreadSeconds() - t0);
    }
    return best / (kElements * sizeof(float));
  }();
  return seconds_per_byte;
}

// Gaussian values at the given density; the same gradient for every benchmark of a density.
const std::vector<float>& Gradient(int density_percent) {
  static std::vector<std::vector<float>> cache(101);
  std::vector<float>& g = cache[static_cast<std::size_t>(density_percent)];
  if (g.empty()) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(density_percent));
    std::bernoulli_distribution keep(density_percent / 100.0);
    std::normal_distribution<float> value(0.0f, 1e-3f);
    g.assign(kElements, 0.0f);
    for (float& v : g) {
      if (keep(rng)) {
        do v = value(rng); while (v == 0.0f);
      }
    }
  }
  return g;
}

std::unique_ptr<Compressor> Make(const std::string& name) {
  if (name == "none") return std::move(*dense::DenseCompressor::Create({}));
  if (name == "topk") return std::move(*topk::TopKCompressor::Create({}));
  if (name == "s2reducer") return std::move(*s2reducer::S2ReducerCompressor::Create({}));
  return std::move(*casq::CasqCompressor::Create({}));
}

void Report(benchmark::State& state, std::int64_t wire_bytes) {
  const double bytes = kElements * sizeof(float);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  // Per iteration this counter holds the time a memcpy of the gradient takes; as a rate it
  // becomes (memcpy time) / (our time): throughput as a fraction of memcpy's.
  state.counters["vs_memcpy"] =
      benchmark::Counter(bytes * MemcpySecondsPerByte(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["wire_bytes"] = static_cast<double>(wire_bytes);
}

void BM_Memcpy(benchmark::State& state) {
  std::vector<float> src(kElements, 1.0f), dst(kElements);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kElements * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  Report(state, 0);
}

void BM_Encode(benchmark::State& state, const std::string& name) {
  const std::vector<float>& g = Gradient(static_cast<int>(state.range(0)));
  std::unique_ptr<Compressor> c = Make(name);
  // One payload reused across steps, as an executor keeps one per rank and bucket.
  Payload payload;
  std::int64_t step = 0;
  for (auto _ : state) {
    const absl::Status s = c->EncodeInto(g, {0, step++}, payload);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(payload.parts.data());
    benchmark::ClobberMemory();
  }
  Report(state, payload.bytes());
}

void BM_Decode(benchmark::State& state, const std::string& name) {
  const std::vector<float>& g = Gradient(static_cast<int>(state.range(0)));
  std::unique_ptr<Compressor> c = Make(name);
  auto p = c->Encode(g, {});
  if (!p.ok()) {
    state.SkipWithError(std::string(p.status().message()).c_str());
    return;
  }
  std::vector<float> out(kElements);
  for (auto _ : state) {
    const absl::Status s = c->Decode({&*p, 1}, {1, false}, out);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  Report(state, p->bytes());
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, none, std::string("none"))->Arg(100)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, none, std::string("none"))->Arg(100)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, topk, std::string("topk"))->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, topk, std::string("topk"))->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, s2reducer, std::string("s2reducer"))->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, s2reducer, std::string("s2reducer"))->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, casq, std::string("casq"))->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, casq, std::string("casq"))->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace testbed

BENCHMARK_MAIN();
