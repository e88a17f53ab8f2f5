// The mpi communicator's all-reduce against plain MPI_Allreduce on the same buffers in the
// same run: `mpirun -np N comm_mpi_bench`. Each iteration runs both once (plain first);
// the time of an operation is the slowest rank's, and the counters give both algorithm
// bandwidths and comm_over_plain = plain time / communicator time (1.0 = no overhead).
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

testbed::CommGroup* g_world = nullptr;

double SlowestRank(double seconds) {
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

void BM_AllReduceVsPlainMpi(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto count = static_cast<std::int64_t>(bytes / sizeof(float));
  std::vector<float> send(static_cast<size_t>(count), 1.0f), recv(static_cast<size_t>(count));
  // Warm up both paths (connections, pages).
  MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  (void)g_world->AllReduce(send.data(), recv.data(), count, testbed::DataType::kFloat32, testbed::ReduceOp::kSum);
  double plain_s = 0, comm_s = 0;
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double plain = SlowestRank(MPI_Wtime() - t0);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    absl::Status s =
        g_world->AllReduce(send.data(), recv.data(), count, testbed::DataType::kFloat32, testbed::ReduceOp::kSum);
    const double comm = SlowestRank(MPI_Wtime() - t0);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
    plain_s += plain;
    comm_s += comm;
    state.SetIterationTime(plain + comm);
  }
  const double total = static_cast<double>(bytes) * static_cast<double>(state.iterations());
  state.counters["plain_GBps"] = total / plain_s / 1e9;
  state.counters["comm_GBps"] = total / comm_s / 1e9;
  state.counters["comm_over_plain"] = plain_s / comm_s;
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
    testbed::ParamSet params;
    for (const auto& spec : entry->decl.params) params.Set(spec.name(), spec.default_value());
    auto comm = registry.Create<testbed::Communicator>("mpi", params);
    auto endpoints = (*comm)->Connect(0);
    if (!endpoints.ok()) {
      std::fprintf(stderr, "%s\n", std::string(endpoints.status().message()).c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    g_world = (*endpoints)[0].get();
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
    g_world = nullptr;
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
