// Fake-quantised linear forward (testbed/train/quantize.h: the input and the weights rounded
// to b bits, then the product) against the fp32 forward of the same layer, timed alternately in
// the same iterations. Reported: samples per second of the quantised layer and
// `time_vs_fp32`, its time over the fp32 layer's (above 1: the rounding's cost; the product
// itself stays fp32, as on a CPU without integer matrix units).
#include <benchmark/benchmark.h>

#include <chrono>

#include "testbed/train/linear.h"

namespace {

using namespace testbed::train;
using Clock = std::chrono::steady_clock;

void BM_QuantizedLinearForward(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  const std::int64_t width = state.range(1), batch = 64;
  Rng rng(1), same(1);
  Linear<float> fp32("fp32", width, width, true, rng), quantised("q", width, width, true, same);
  LayerQuant q;
  q.weight_bits = q.activation_bits = bits;
  if (!quantised.SetQuantization(q).ok()) {
    state.SkipWithError("unsupported width");
    return;
  }
  Matrix<float> x(batch, width);
  Rng data(2);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(data.Normal());
  LayerCache<float> c1, c2;
  double fp32_s = 0, quantised_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto y1 = fp32.Forward(x, c1);
    const auto t1 = Clock::now();
    auto y2 = quantised.Forward(x, c2);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(y1->data());
    benchmark::DoNotOptimize(y2->data());
    fp32_s += std::chrono::duration<double>(t1 - t0).count();
    quantised_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["quantised_samples_per_s"] = batch * n / quantised_s;
  state.counters["fp32_samples_per_s"] = batch * n / fp32_s;
  state.counters["time_vs_fp32"] = quantised_s / fp32_s;
}
BENCHMARK(BM_QuantizedLinearForward)
    ->ArgNames({"bits", "width"})
    ->ArgsProduct({{32, 16, 8, 4}, {64, 256}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
BENCHMARK_MAIN();
