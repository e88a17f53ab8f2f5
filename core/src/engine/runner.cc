#include "engine/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/backend.h"
#include "engine/progress.h"
#include "engine/run_claims.h"
#include "engine/run_execution.h"
#include "engine/shared_runs.h"
#include "testbed/status_macros.h"
#include "results/results_file.h"

namespace testbed {
namespace {

// Under mpirun every process runs this command: the launcher's rank and size, or (0, 1).
std::pair<int, int> LauncherRank() {
  for (auto [rank_var, size_var] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                    std::pair{"PMI_RANK", "PMI_SIZE"}}) {
    const char* r = std::getenv(rank_var);
    const char* n = std::getenv(size_var);
    if (r != nullptr && n != nullptr) return {std::atoi(r), std::max(1, std::atoi(n))};
  }
  return {0, 1};
}

bool Selected(const std::vector<std::string>& only, const std::string& arm) {
  return only.empty() || std::find(only.begin(), only.end(), arm) != only.end();
}

}  // namespace

absl::StatusOr<std::vector<ResolvedRun>> ResolveAll(const Experiment& experiment, const Registry& registry,
                                                    const PresetLibrary& presets,
                                                    const std::vector<std::string>& only_arms,
                                                    const std::vector<std::string>& only_points) {
  for (const std::string& pt : only_points) {
    const auto& all = experiment.runs();
    if (std::none_of(all.begin(), all.end(), [&](const RunSpec& s) { return s.point == pt; })) {
      std::vector<std::string> names;
      for (const RunSpec& s : all) {
        if (std::find(names.begin(), names.end(), s.point) == names.end()) names.push_back(s.point);
      }
      return absl::InvalidArgumentError(absl::StrCat("--point ", pt, ": no such point; points are ",
                                                     names.size() == 1 && names[0].empty() ? "(none: nothing is swept)"
                                                                                           : absl::StrJoin(names, ", ")));
    }
  }
  for (const std::string& a : only_arms) {
    if (std::none_of(experiment.arms().begin(), experiment.arms().end(), [&](const ArmSpec& s) { return s.name == a; })) {
      std::vector<std::string> names;
      for (const ArmSpec& s : experiment.arms()) names.push_back(s.name);
      return absl::InvalidArgumentError(absl::StrCat("--only ", a, ": no such arm; arms are ", absl::StrJoin(names, ", ")));
    }
  }
  std::vector<ResolvedRun> runs;
  std::vector<std::string> errors;
  std::set<std::string> seen;
  // What the file sets at its top and every run overrides is still checked (after the runs,
  // whose messages about the same value come first).
  const absl::Status file_settings = CheckFileSettings(experiment.doc(), registry);
  for (const RunSpec& spec : experiment.runs()) {
    if (!Selected(only_arms, spec.arm) || !Selected(only_points, spec.point)) continue;
    auto r = ResolveRun(spec, registry, presets);
    if (!r.ok()) {
      // Identical errors (the same bad key seen by every run) are reported once, under the
      // first run that has them; ResolveRun's own "run '<id>':" heading is not compared.
      const std::string heading = absl::StrCat("run '", spec.id, "':");
      std::vector<std::string> fresh;
      for (absl::string_view line : absl::StrSplit(r.status().message(), '\n')) {
        if (line == heading) continue;
        if (seen.insert(std::string(line)).second) fresh.emplace_back(line);
      }
      if (!fresh.empty()) errors.push_back(absl::StrCat(heading, "\n", absl::StrJoin(fresh, "\n")));
      continue;
    }
    runs.push_back(std::move(*r));
  }
  if (!file_settings.ok()) {
    // Lines a run has already reported are not repeated.
    std::vector<std::string> fresh;
    for (absl::string_view line : absl::StrSplit(file_settings.message(), '\n')) {
      if (seen.insert(std::string(line)).second) fresh.emplace_back(line);
    }
    if (!fresh.empty()) errors.push_back(absl::StrJoin(fresh, "\n"));
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  return runs;
}

absl::StatusOr<std::pair<int, int>> ParseShard(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '/');
  int k = -1, n = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &k) || !absl::SimpleAtoi(parts[1], &n) || n < 1 || k < 0 || k >= n) {
    return absl::InvalidArgumentError(absl::StrCat("--shard ", text, ": expected K/N with 0 <= K < N (part K of N, from 0; "
                                                   "a Slurm array --array=0-(N-1) gives K = $SLURM_ARRAY_TASK_ID)"));
  }
  return std::pair{k, n};
}

std::string ShardOutput(const std::string& output, int index, int count) {
  const std::filesystem::path p(output);
  const std::string tag = absl::StrCat(".shard-", index, "-of-", count);
  return (p.parent_path() / absl::StrCat(p.stem().string(), tag, p.extension().string())).string();
}

absl::StatusOr<RunnerSummary> RunExperiment(const Experiment& experiment, const Registry& registry,
                                            const PresetLibrary& presets, const RunnerOptions& options) {
  auto meta = ResolveMeta(experiment.doc());
  if (!meta.ok()) return meta.status();
  auto resolved = ResolveAll(experiment, registry, presets, options.only_arms, options.only_points);
  if (!resolved.ok()) return resolved.status();
  std::vector<ResolvedRun>& runs = *resolved;
  if (options.shard_count > 1) {
    // Part K of N: the runs dealt in turn, so that each part gets every kind of run.
    std::vector<ResolvedRun> mine;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (static_cast<int>(i % static_cast<size_t>(options.shard_count)) == options.shard_index) {
        mine.push_back(std::move(runs[i]));
      }
    }
    runs = std::move(mine);
  }

  RunnerSummary summary;
  summary.total = static_cast<int>(runs.size());
  summary.output = options.output.empty() ? meta->output : options.output;
  if (options.shard_count > 1 && options.output.empty()) {
    summary.output = ShardOutput(meta->output, options.shard_index, options.shard_count);
  }

  ResultsHeader header;
  header.experiment = meta->name;
  header.paper = meta->paper;
  header.source_file = experiment.file();
  header.source_text = experiment.source_text();
  header.sets = experiment.sets();
  header.backend = meta->backend;
  header.metric = meta->metric;
  header.reference_metric = meta->reference_metric;
  header.columns = meta->columns;
  for (const ArmSpec& a : experiment.arms()) header.arms.push_back(a.name);
  header.points = experiment.points();
  header.sweep_keys = experiment.sweep_keys();
  for (const Reference& r : experiment.references()) header.references.push_back({r.arm, r.point, r.value});

  std::error_code ec;
  std::vector<size_t> todo;
  std::optional<ResultsFile> file;
  if (options.dry_run) {
    // Read what is there (if anything) only to say what would be skipped.
    std::vector<StoredRun> existing;
    if (std::filesystem::exists(summary.output, ec)) {
      auto c = ResultsFile::Read(summary.output, false);
      if (c.ok()) existing = c->runs;
    }
    std::string out = absl::StrFormat("%s: %d runs (backend %s), results to %s\n", meta->name, summary.total,
                                      meta->backend, summary.output);
    for (const ResolvedRun& r : runs) {
      const bool done =
          std::any_of(existing.begin(), existing.end(), [&](const StoredRun& s) { return AlreadyDone(s, r); });
      if (done) ++summary.skipped;
      std::vector<std::string> comps;
      for (const auto& [kind, choice] : r.components) comps.push_back(absl::StrCat(KindName(kind), "=", choice.name));
      absl::StrAppend(&out, absl::StrFormat("  %-40s %s%s\n", r.spec.id, absl::StrJoin(comps, " "),
                                            done ? "  (done, skipped)" : ""));
    }
    summary.table = out;
    return summary;
  }

  // Under mpirun: real runs need every process (each hosts one rank), in the same order, so
  // nothing is skipped and runs go one at a time; the other backends run on the first
  // process only. Only the first process writes results and prints.
  const auto [launcher_rank, launcher_size] = LauncherRank();
  // Simulated or planned runs under mpirun with a job id: every process takes runs in turn.
  if (const std::string job = launcher_size > 1 && meta->backend != "real" ? RunClaims::JobId() : ""; !job.empty()) {
    SharedJob shared{launcher_rank, launcher_size, job};
    return RunShared(experiment, header, runs, registry, options, shared, std::move(summary));
  }
  if (launcher_size > 1 && launcher_rank != 0) {
    if (meta->backend != "real") return summary;
    for (const ResolvedRun& r : runs) {
      StoredRun result = Execute(r, registry);
      if (result.status != "ok") {
        std::fprintf(stderr, "rank %d: run %s failed: %s\n", launcher_rank, r.spec.id.c_str(), result.error.c_str());
        ++summary.failed;
      }
    }
    return summary;
  }
  // --fresh: the old file moved aside by the process that writes (under mpirun every process
  // runs this command, and only the first may touch the file).
  if (options.fresh && std::filesystem::exists(summary.output, ec)) {
    absl::StatusOr<std::string> backup = ResultsFile::MoveAside(summary.output);
    if (!backup.ok()) return backup.status();
    if (options.progress) std::fprintf(options.progress, "previous results kept as %s\n", backup->c_str());
  }
  auto opened = ResultsFile::Open(summary.output, header);
  if (!opened.ok()) return opened.status();
  file.emplace(std::move(*opened));
  for (size_t i = 0; i < runs.size(); ++i) {
    const StoredRun* prev = file->Find(runs[i].spec.id);
    if (launcher_size == 1 && prev && AlreadyDone(*prev, runs[i])) {
      ++summary.skipped;
    } else {
      todo.push_back(i);
    }
  }

  g_interrupted = false;
  auto old_int = std::signal(SIGINT, OnSignal);
  auto old_term = std::signal(SIGTERM, OnSignal);
  Progress progress(summary.total, summary.skipped, options.progress);

  // Workers run; the calling thread alone touches the HDF5 file.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StoredRun> finished;
  std::atomic<size_t> next{0};
  const int jobs = launcher_size > 1 ? 1 : std::max(1, std::min<int>(options.jobs, static_cast<int>(todo.size())));
  std::vector<std::thread> workers;
  for (int w = 0; w < jobs; ++w) {
    workers.emplace_back([&] {
      while (!g_interrupted) {
        const size_t k = next.fetch_add(1);
        if (k >= todo.size()) break;
        const ResolvedRun& run = runs[todo[k]];
        progress.Started(run.spec.id);
        StoredRun result = Execute(run, registry);
        if (result.status != "cancelled") progress.Finished(run.spec.id, result.status == "ok", result.wall_time_s);
        {
          std::lock_guard<std::mutex> lock(mu);
          finished.push_back(std::move(result));
        }
        cv.notify_one();
      }
    });
  }
  absl::Status write_error;
  size_t written = 0;
  size_t expected = todo.size();
  std::atomic<int> alive{jobs};
  std::thread joiner([&] {
    for (auto& t : workers) t.join();
    alive = 0;
    cv.notify_one();
  });
  while (true) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !finished.empty() || alive == 0; });
    if (finished.empty() && alive == 0) break;
    StoredRun r = std::move(finished.front());
    finished.pop_front();
    lock.unlock();
    if (r.status == "cancelled") continue;
    if (r.status == "ok") ++summary.ran; else ++summary.failed, ++summary.ran;
    if (write_error.ok()) {
      write_error = file->Append(r);
    }
    ++written;
  }
  joiner.join();
  progress.Done();
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  if (!write_error.ok()) return write_error;
  if (g_interrupted && written < expected) {
    return absl::CancelledError(absl::StrFormat("interrupted after %d of %d runs; %s holds every completed run, and "
                                                "the same command resumes",
                                                summary.skipped + static_cast<int>(written), summary.total,
                                                summary.output));
  }

  // The table covers this experiment's (selected) runs as they now stand in the file.
  TESTBED_RETURN_IF_ERROR(Tabulate(experiment, header, runs, file->runs(), summary));
  return summary;
}

}  // namespace testbed
