#include "engine/run_execution.h"

#include <chrono>
#include <csignal>
#include <ctime>
#include <exception>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/backend.h"
#include "engine/runner.h"

namespace testbed {

std::atomic<bool> g_interrupted{false};

void OnSignal(int sig) {
  if (g_interrupted.exchange(true)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

namespace {

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

bool AlreadyDone(const StoredRun& stored, const ResolvedRun& run) {
  if (stored.id != run.spec.id || stored.status != "ok" || stored.config_hash != run.config_hash) return false;
  for (const auto& [key, value] : run.recorded) {
    if (!absl::StartsWith(key, kLibraryKeyPrefix)) continue;
    for (const auto& [k, v] : stored.params) {
      if (k == key && !(v == value)) return false;
    }
  }
  return true;
}

StoredRun Execute(const ResolvedRun& run, const Registry& registry) {
  StoredRun out;
  out.id = run.spec.id;
  out.index = run.spec.index;
  out.arm = run.spec.arm;
  out.point = run.spec.point;
  out.seed = run.seed;
  out.backend = run.meta.backend;
  out.git_revision = GitRevision();
  out.start_time = NowIso();
  out.config_hash = run.config_hash;
  out.config_toml = run.config_toml;
  out.params = run.recorded;
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<RunOutput> result = absl::InternalError("no backend");
  try {
    auto make = BuiltinBackends().find(run.meta.backend);
    std::unique_ptr<Backend> backend = make->second();
    RunControl control;
    control.cancelled = [] { return g_interrupted.load(); };
    result = backend->Run(run, registry, control);
  } catch (const std::exception& e) {
    result = absl::InternalError(absl::StrCat("exception: ", e.what()));
  } catch (...) {
    result = absl::InternalError("non-standard exception");
  }
  out.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (result.ok()) {
    out.status = "ok";
    out.output = std::move(*result);
  } else {
    // A run cut short by an interrupt is not a result: it is not recorded, and reruns.
    out.status = result.status().code() == absl::StatusCode::kCancelled && g_interrupted ? "cancelled" : "failed";
    out.error = std::string(result.status().message());
  }
  return out;
}

absl::Status Tabulate(const Experiment& experiment, const ResultsHeader& header, const std::vector<ResolvedRun>& runs,
                      const std::vector<StoredRun>& stored, RunnerSummary& summary) {
  std::map<std::string, const StoredRun*> by_id;
  for (const StoredRun& s : stored) by_id.emplace(s.id, &s);
  std::vector<StoredRun> mine;
  for (const ResolvedRun& r : runs) {
    if (auto it = by_id.find(r.spec.id); it != by_id.end()) mine.push_back(*it->second);
  }
  // A metric no run reports would print an empty table: say so, with what they do report.
  const StoredRun* any_ok = nullptr;
  bool reported = false;
  for (const StoredRun& r : mine) {
    if (r.status != "ok") continue;
    if (any_ok == nullptr) any_ok = &r;
    if (r.output.metrics.Find(header.metric) != nullptr) reported = true;
  }
  if (any_ok != nullptr && !reported) {
    std::vector<std::string> names;
    for (const Metric& m : any_ok->output.metrics.all()) names.push_back(m.name);
    return absl::InvalidArgumentError(absl::StrCat(
        experiment.doc().Where({"experiment", "metric"}).ToString(), ": [experiment] metric '", header.metric,
        "': no run reports it (the ", "runs are kept in ", summary.output, "); they report: ", absl::StrJoin(names, ", ")));
  }
  summary.rows = BuildReport(header, mine);
  summary.table = FormatReport(header, summary.rows);
  return absl::OkStatus();
}

}  // namespace testbed
