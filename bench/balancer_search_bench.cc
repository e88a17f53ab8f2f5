// Pro-Prophet's placement search (plugins/moe/prophet) at 32 experts x 32 ranks and 256 x
// 256, on a skewed synthetic routing of MoE-GPT M's shape (d_model 1024, FFN 2048, 1,024
// tokens per rank, top-1). It runs every few iterations, so it must stay far below an
// iteration's time (targets: under 1 ms and under 50 ms). Reference in the same run: one
// routing of the layer from scratch (RouteTokens, what one cost evaluation would take without
// the incremental flow), so `search_over_routing` says how many from-scratch routings the
// whole search is worth. Counters: search_ms, routing_ms, search_over_routing, steps.
#include <benchmark/benchmark.h>

#include <chrono>

#include "search.h"
#include "testbed/load_balancer.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace testbed;

void BM_ProProphetSearch(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  MoeRouting m;
  m.skew = 1.2;
  m.seed = 3;
  const Routing r = SyntheticRouting(m, 0, 0, n, n, 1024, 1);
  MoeLayerShape s;
  s.experts = s.ranks = n;
  s.hidden = 1024;
  s.ffn_hidden = 2048;
  s.expert_params = 2 * 1024 * 2048 + 2048 + 1024;
  s.tokens_per_rank = 1024;
  s.expert_flops_per_token = 4.0 * 1024 * 2048;
  s.other_flops_per_token = 8.0 * 1024 * 1024;
  const prophet::CostConstants k;
  const ExpertPlacement base = DefaultPlacement(n, n);
  double search_s = 0, routing_s = 0, steps = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const prophet::SearchResult res = prophet::ProProphetSearch(s, k, r, prophet::GreedyOptions{});
    const auto t1 = Clock::now();
    const TokenFlow f = RouteTokens(r, base, -1);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(res.cost.total_s);
    benchmark::DoNotOptimize(f.computed.data());
    search_s += std::chrono::duration<double>(t1 - t0).count();
    routing_s += std::chrono::duration<double>(t2 - t1).count();
    steps = res.steps;
  }
  const double it = static_cast<double>(state.iterations());
  state.counters["search_ms"] = search_s / it * 1e3;
  state.counters["routing_ms"] = routing_s / it * 1e3;
  state.counters["search_over_routing"] = search_s / routing_s;
  state.counters["steps"] = steps;
}

BENCHMARK(BM_ProProphetSearch)->Arg(32)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
