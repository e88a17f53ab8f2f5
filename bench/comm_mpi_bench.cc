// The mpi communicator's all-reduce against plain MPI on the same buffers in the same run:
// `mpirun -np N comm_mpi_bench`. Each iteration runs, in turn, the blocking MPI_Allreduce
// (the reference), MPI_Iallreduce + MPI_Wait (the non-blocking call the communicator's
// default `all_reduce = "library"` makes), the communicator with "library" and the
// communicator with "ring" (its own reduce-scatter + all-gather over point-to-point). The
// time of an operation is the slowest rank's. Counters: each path's algorithm bandwidth and
// its ratio to the blocking call (> 1 = faster than plain MPI_Allreduce); library_over_iplain
// isolates what the communicator itself adds to the non-blocking call.
// Iteration counts are fixed so that every rank runs the same operations; only rank 0
// reports. Without MPI at build time this program only says so.
#include <cstdio>

#if TESTBED_BENCH_HAS_MPI

#include <mpi.h>

#include <vector>

#include <benchmark/benchmark.h>

#include "engine/plugin_loader.h"
#include "testbed/communicator.h"
#include "testbed/registry.h"

namespace {

testbed::CommGroup* g_library = nullptr;
testbed::CommGroup* g_ring = nullptr;

double SlowestRank(double seconds) {
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

// One timed run of `op` on every rank, started together.
template <typename Op>
double Timed(Op&& op) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  op();
  return SlowestRank(MPI_Wtime() - t0);
}

void BM_AllReduceVsPlainMpi(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto count = static_cast<std::int64_t>(bytes / sizeof(float));
  const int n = static_cast<int>(count);
  std::vector<float> send(static_cast<size_t>(count), 1.0f), recv(static_cast<size_t>(count));
  absl::Status failed;
  auto plain = [&] { MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
  auto iplain = [&] {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  };
  auto through = [&](testbed::CommGroup* group) {
    return [&, group] {
      absl::Status s =
          group->AllReduce(send.data(), recv.data(), count, testbed::DataType::kFloat32, testbed::ReduceOp::kSum);
      if (!s.ok() && failed.ok()) failed = s;
    };
  };
  auto library = through(g_library);
  auto ring = through(g_ring);
  // Warm up every path (connections, pages).
  plain();
  iplain();
  library();
  ring();
  double plain_s = 0, iplain_s = 0, library_s = 0, ring_s = 0;
  for (auto _ : state) {
    const double p = Timed(plain), ip = Timed(iplain), l = Timed(library), r = Timed(ring);
    if (!failed.ok()) {
      state.SkipWithError(std::string(failed.message()).c_str());
      break;
    }
    plain_s += p;
    iplain_s += ip;
    library_s += l;
    ring_s += r;
    state.SetIterationTime(p + ip + l + r);
  }
  const double total = static_cast<double>(bytes) * static_cast<double>(state.iterations());
  state.counters["plain_GBps"] = total / plain_s / 1e9;
  state.counters["iplain_GBps"] = total / iplain_s / 1e9;
  state.counters["library_GBps"] = total / library_s / 1e9;
  state.counters["ring_GBps"] = total / ring_s / 1e9;
  state.counters["iplain_over_plain"] = plain_s / iplain_s;
  state.counters["library_over_plain"] = plain_s / library_s;
  state.counters["library_over_iplain"] = iplain_s / library_s;
  state.counters["ring_over_plain"] = plain_s / ring_s;
}

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  {
    testbed::Registry registry;
    testbed::PluginLoader loader(registry);
    auto loaded = loader.Load(std::string(TESTBED_BENCH_PLUGIN_DIR) + "/mpi.so");
    const testbed::ComponentEntry* entry = registry.Find(testbed::ComponentKind::kCommunicator, "mpi");
    if (!loaded.ok() || entry == nullptr) {
      std::fprintf(stderr, "cannot load the mpi communicator plugin\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    // The same communicator twice, once per all-reduce algorithm; each gets its own groups.
    std::vector<std::shared_ptr<testbed::Communicator>> communicators;
    std::vector<std::unique_ptr<testbed::CommGroup>> worlds;
    for (const char* algorithm : {"library", "ring"}) {
      testbed::ParamSet params;
      for (const auto& spec : entry->decl.params) params.Set(spec.name(), spec.default_value());
      params.Set("all_reduce", std::string(algorithm));
      auto comm = registry.Create<testbed::Communicator>("mpi", params);
      auto endpoints = comm.ok() ? (*comm)->Connect(0) : comm.status();
      if (!endpoints.ok()) {
        std::fprintf(stderr, "%s\n", std::string(endpoints.status().message()).c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      communicators.push_back(std::move(*comm));
      worlds.push_back(std::move((*endpoints)[0]));
    }
    g_library = worlds[0].get();
    g_ring = worlds[1].get();
    // Fixed iterations per size: every rank must run exactly the same operations.
    const std::vector<std::pair<std::int64_t, int>> sizes = {
        {1 << 16, 400}, {1 << 20, 100}, {16 << 20, 20}, {64 << 20, 10}};
    for (const auto& [bytes, iterations] : sizes) {
      benchmark::RegisterBenchmark("BM_AllReduceVsPlainMpi", BM_AllReduceVsPlainMpi)
          ->ArgName("bytes")
          ->Arg(bytes)
          ->Iterations(iterations)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::Initialize(&argc, argv);
    if (rank == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      NullReporter quiet;
      benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    benchmark::Shutdown();
    g_library = g_ring = nullptr;
  }
  MPI_Finalize();
  return rc;
}

#else

int main() {
  std::puts("comm_mpi_bench: built without MPI (OpenMPI was not found); nothing to measure");
  return 0;
}

#endif
