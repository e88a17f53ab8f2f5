// The local communicator's all-reduce against memcpy bandwidth measured in the same run:
// each iteration copies the buffer once with memcpy and all-reduces it once over N thread
// ranks; counters give both bandwidths and their ratio (algorithm bandwidth: buffer bytes
// over time; a local all-reduce reads every rank's input and writes every output once).
#include <barrier>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/plugin_loader.h"
#include "testbed/communicator.h"
#include "testbed/registry.h"

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<testbed::Communicator> LocalCommunicator(testbed::Registry& registry, testbed::PluginLoader& loader) {
  auto loaded = loader.Load(std::string(TESTBED_BENCH_PLUGIN_DIR) + "/local.so");
  if (!loaded.ok()) return nullptr;
  const testbed::ComponentEntry* entry = registry.Find(testbed::ComponentKind::kCommunicator, "local");
  testbed::ParamSet params;
  for (const auto& spec : entry->decl.params) params.Set(spec.name(), spec.default_value());
  auto comm = registry.Create<testbed::Communicator>("local", params);
  return comm.ok() ? *comm : nullptr;
}

void BM_LocalAllReduceVsMemcpy(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const auto count = static_cast<std::int64_t>(bytes / sizeof(float));
  testbed::Registry registry;
  testbed::PluginLoader loader(registry);
  auto comm = LocalCommunicator(registry, loader);
  if (comm == nullptr) {
    state.SkipWithError("cannot load the local communicator plugin");
    return;
  }
  auto endpoints = comm->Connect(ranks);
  if (!endpoints.ok()) {
    state.SkipWithError("connect failed");
    return;
  }
  std::vector<std::vector<float>> send(static_cast<size_t>(ranks), std::vector<float>(static_cast<size_t>(count), 1.0f));
  std::vector<std::vector<float>> recv(static_cast<size_t>(ranks), std::vector<float>(static_cast<size_t>(count)));
  std::vector<char> src(bytes, 1), dst(bytes);

  // Ranks 1..N-1 run on persistent threads, released once per iteration.
  std::barrier sync(ranks);
  bool stop = false;
  auto reduce = [&](int r) {
    (void)(*endpoints)[static_cast<size_t>(r)]->AllReduce(send[static_cast<size_t>(r)].data(),
                                                          recv[static_cast<size_t>(r)].data(), count,
                                                          testbed::DataType::kFloat32, testbed::ReduceOp::kSum);
  };
  std::vector<std::thread> workers;
  for (int r = 1; r < ranks; ++r) {
    workers.emplace_back([&, r] {
      for (;;) {
        sync.arrive_and_wait();
        if (stop) return;
        reduce(r);
        sync.arrive_and_wait();
      }
    });
  }
  auto all_reduce_once = [&] {
    sync.arrive_and_wait();
    reduce(0);
    sync.arrive_and_wait();
  };
  all_reduce_once();  // warm up: page in every buffer
  std::memcpy(dst.data(), src.data(), bytes);

  double memcpy_s = 0, reduce_s = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
    auto t1 = Clock::now();
    all_reduce_once();
    auto t2 = Clock::now();
    memcpy_s += std::chrono::duration<double>(t1 - t0).count();
    reduce_s += std::chrono::duration<double>(t2 - t1).count();
  }
  stop = true;
  sync.arrive_and_wait();
  for (auto& w : workers) w.join();

  const double total = static_cast<double>(bytes) * static_cast<double>(state.iterations());
  state.counters["memcpy_GBps"] = total / memcpy_s / 1e9;
  state.counters["allreduce_GBps"] = total / reduce_s / 1e9;
  state.counters["allreduce_over_memcpy"] = memcpy_s / reduce_s;
}

BENCHMARK(BM_LocalAllReduceVsMemcpy)
    ->ArgNames({"ranks", "bytes"})
    ->ArgsProduct({{2, 4}, {1 << 16, 1 << 20, 16 << 20, 64 << 20}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
