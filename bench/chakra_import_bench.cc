// Importing a Chakra trace: a file of 1,000,000 nodes, compute and collective nodes
// alternately with 2 data dependencies and 2 or 3 attributes each (the shape of a converted
// PyTorch trace). BM_ReadTrace: ReadTrace (core/src/chakra/et_io.h) alone; BM_ImportTrace:
// ReadTrace and ImportTraceSet (chakra/import.h) into a checked Schedule, what `[workload]
// chakra` does before simulating. Each against reading the same file's bytes into memory,
// timed alternately in the same iterations. Reported: `nodes_per_s`, `reference_nodes_per_s`
// (the file's nodes per second of the raw read) and `time_vs_reference` (time over the raw
// read's): what parsing, converting and building the schedule cost on top of the I/O. The
// file is written once, to the temporary directory, and removed at exit.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "chakra/et_io.h"
#include "chakra/import.h"

namespace {

using namespace testbed::chakra;
using Clock = std::chrono::steady_clock;

constexpr int kNodes = 1'000'000;

Trace BigTrace() {
  Trace t;
  t.version = "0.0.4";
  t.nodes.resize(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    Node& n = t.nodes[static_cast<std::size_t>(i)];
    n.id = static_cast<std::uint64_t>(i);
    for (int back : {1, 2}) {
      if (i >= back) n.data_deps.push_back(static_cast<std::uint64_t>(i - back));
    }
    n.duration_micros = static_cast<std::uint64_t>(10 + i % 90);
    if (i % 2 == 0) {
      n.name = absl::StrCat("layer_", i / 2 % 96, "_matmul");
      n.type = static_cast<std::int32_t>(NodeType::kComp);
      n.attrs = {Attr{"num_ops", std::int64_t{1} << 30, 0}, Attr{"tensor_size", std::int64_t{1} << 24, 13}};
    } else {
      n.name = absl::StrCat("allreduce_", i / 2);
      n.type = static_cast<std::int32_t>(NodeType::kCommColl);
      n.attrs = {Attr{"comm_type", static_cast<std::int64_t>(CollType::kAllReduce), 0},
                 Attr{"comm_size", std::int64_t{1} << 26, 13}, Attr{"pg_name", std::string("0"), 0}};
    }
  }
  return t;
}

// The reference: the file's bytes into a string of its size, in one read.
std::string RawBytes(const std::string& path) {
  std::string bytes(static_cast<std::size_t>(std::filesystem::file_size(path)), '\0');
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
    std::fclose(f);
  }
  return bytes;
}

// The trace file, written on first use (and read once, so that the first timed read finds it
// as the later ones do) and removed at exit.
class TraceFile {
 public:
  TraceFile()
      : path_((std::filesystem::temp_directory_path() / absl::StrCat("chakra_import_bench_", ::getpid(), ".0.et"))
                  .string()) {
    status_ = WriteTrace(BigTrace(), path_);
    if (status_.ok()) benchmark::DoNotOptimize(RawBytes(path_).size());
  }
  ~TraceFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] const absl::Status& status() const noexcept { return status_; }

 private:
  std::string path_;
  absl::Status status_;
};

// Times `step` (the file's path -> nodes it made, or an error) against the raw read.
template <typename Step>
void AgainstRawRead(benchmark::State& state, Step step) {
  static const TraceFile file;
  if (!file.status().ok()) {
    state.SkipWithError(std::string(file.status().message()).c_str());
    return;
  }
  double step_s = 0, raw_s = 0, nodes = 0;
  std::size_t file_bytes = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const std::string raw = RawBytes(file.path());
    const auto t1 = Clock::now();
    const absl::StatusOr<std::size_t> made = step(file.path());
    const auto t2 = Clock::now();
    if (!made.ok() || *made != static_cast<std::size_t>(kNodes)) {
      state.SkipWithError(made.ok() ? "nodes lost" : std::string(made.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(raw.data());
    file_bytes = raw.size();
    const double this_s = std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(this_s);
    step_s += this_s;
    raw_s += std::chrono::duration<double>(t1 - t0).count();
    nodes += kNodes;
  }
  // With manual time, a rate counter divides by the step's time alone.
  state.counters["nodes_per_s"] = benchmark::Counter(nodes, benchmark::Counter::kIsRate);
  state.counters["reference_nodes_per_s"] = nodes / raw_s;
  state.counters["time_vs_reference"] = step_s / raw_s;
  state.counters["file_MiB"] = static_cast<double>(file_bytes) / (1 << 20);
}

void BM_ReadTrace(benchmark::State& state) {
  AgainstRawRead(state, [](const std::string& path) -> absl::StatusOr<std::size_t> {
    auto trace = ReadTrace(path);
    if (!trace.ok()) return trace.status();
    return trace->nodes.size();
  });
}
BENCHMARK(BM_ReadTrace)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_ImportTrace(benchmark::State& state) {
  AgainstRawRead(state, [](const std::string& path) -> absl::StatusOr<std::size_t> {
    TraceSet set;
    auto trace = ReadTrace(path);
    if (!trace.ok()) return trace.status();
    set.ranks.push_back(*std::move(trace));
    set.comm_groups = {{"0", {0}}};
    auto imported = ImportTraceSet(set, path);
    if (!imported.ok()) return imported.status();
    if (absl::Status st = imported->schedule.Check(); !st.ok()) return st;
    return imported->schedule.size();
  });
}
BENCHMARK(BM_ImportTrace)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
