#include "engine/shared_runs.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/progress.h"
#include "engine/run_claims.h"
#include "engine/run_execution.h"
#include "testbed/status_macros.h"

namespace testbed {

absl::StatusOr<RunnerSummary> RunShared(const Experiment& experiment, const ResultsHeader& header,
                                        const std::vector<ResolvedRun>& runs, const Registry& registry,
                                        const RunnerOptions& options, const SharedJob& job, RunnerSummary summary) {
  const bool first = job.rank == 0;
  std::error_code ec;
  absl::StatusOr<RunClaims> claims = absl::UnknownError("unset");
  if (first) {
    if (options.fresh && std::filesystem::exists(summary.output, ec)) {
      absl::StatusOr<std::string> backup = ResultsFile::MoveAside(summary.output);
      if (!backup.ok()) return backup.status();
      if (options.progress) std::fprintf(options.progress, "previous results kept as %s\n", backup->c_str());
    }
  }
  // The first process opens (creates) the results file before the others may.
  absl::StatusOr<ResultsFile> file = absl::UnknownError("unset");
  if (first) {
    file = ResultsFile::Open(summary.output, header);
    if (!file.ok()) return file.status();
    claims = RunClaims::Create(summary.output, job.job);
  } else {
    claims = RunClaims::Join(summary.output, job.job, 600.0);
    if (!claims.ok()) return claims.status();
    file = ResultsFile::Open(summary.output, header);
  }
  if (!claims.ok()) return claims.status();
  if (!file.ok()) return file.status();

  g_interrupted = false;
  auto old_int = std::signal(SIGINT, OnSignal);
  auto old_term = std::signal(SIGTERM, OnSignal);
  // Each process shows the runs it takes.
  Progress progress(summary.total, 0, first ? options.progress : nullptr);
  absl::Status error = absl::OkStatus();
  while (error.ok() && !g_interrupted) {
    absl::StatusOr<std::int64_t> next = claims->Next();
    if (!next.ok()) {
      error = next.status();
      break;
    }
    if (*next >= static_cast<std::int64_t>(runs.size())) break;
    const ResolvedRun& run = runs[static_cast<size_t>(*next)];
    if (const StoredRun* prev = file->Find(run.spec.id); prev != nullptr && AlreadyDone(*prev, run)) {
      ++summary.skipped;
      continue;
    }
    progress.Started(run.spec.id);
    StoredRun result = Execute(run, registry);
    if (result.status == "cancelled") continue;
    progress.Finished(run.spec.id, result.status == "ok", result.wall_time_s);
    ++summary.ran;
    if (result.status != "ok") {
      ++summary.failed;
      if (!first) std::fprintf(stderr, "rank %d: run %s failed: %s\n", job.rank, run.spec.id.c_str(), result.error.c_str());
    }
    error = file->Append(result);
  }
  progress.Done();
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  // Done even after an error, so that the first process does not wait for this one.
  const absl::Status done = claims->Done(summary.skipped);
  if (!error.ok()) return error;
  if (!done.ok()) return done;
  if (g_interrupted) {
    return absl::CancelledError(absl::StrCat("interrupted; ", summary.output,
                                             " holds every completed run, and the same command resumes"));
  }
  if (!first) {
    summary.output.clear();  // the first process reports
    return summary;
  }
  RunClaims::Tally tally;
  while (true) {
    TESTBED_ASSIGN_OR_RETURN(tally, claims->Count());
    if (tally.done >= job.size) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  claims->Remove();
  TESTBED_ASSIGN_OR_RETURN(ResultsFile::Contents all, ResultsFile::Read(summary.output, false));
  TESTBED_RETURN_IF_ERROR(Tabulate(experiment, header, runs, all.runs, summary));
  // What the whole job did: runs skipped by any process, failed runs as the file has them.
  summary.skipped = tally.skipped;
  summary.ran = summary.total - summary.skipped;
  summary.failed = 0;
  for (const ReportRow& r : summary.rows) summary.failed += r.status != "ok" ? 1 : 0;
  return summary;
}

}  // namespace testbed
