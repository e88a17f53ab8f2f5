#include "cli/chakra_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "chakra/astra_text.h"
#include "chakra/et_io.h"
#include "chakra/export.h"
#include "chakra/import.h"
#include "config/experiment.h"
#include "config/run_config.h"
#include "results/results_file.h"
#include "sim/sim_backend.h"
#include "testbed/status_macros.h"

namespace testbed::cli {
namespace {

absl::Status Import(Env& env, const ImportChakraArgs& a) {
  (void)env;
  chakra::TraceSet set;
  if (a.astra_text) {
    chakra::TextWorkloadOptions opt;
    opt.ranks = a.ranks;
    if (opt.ranks < 1) return absl::InvalidArgumentError("--astra-text needs --ranks N (the NPUs it runs on)");
    TESTBED_ASSIGN_OR_RETURN(set, chakra::ConvertTextWorkload(a.traces, opt));
  } else {
    TESTBED_ASSIGN_OR_RETURN(set, chakra::ReadTraceSet(a.traces));
  }
  TESTBED_ASSIGN_OR_RETURN(chakra::ImportedWorkload w, chakra::ImportTraceSet(set, a.traces));
  TESTBED_RETURN_IF_ERROR(w.schedule.Check());
  std::map<std::string, std::int64_t> kinds;
  for (const Task& t : w.schedule.tasks()) {
    kinds[t.kind == TaskKind::kCollective ? CollectiveOpName(t.op) : TaskKindName(t.kind)]++;
  }
  std::printf("%s: %zu ranks, %lld nodes, %zu tasks (", a.traces.c_str(), set.ranks.size(),
              static_cast<long long>(w.nodes), w.schedule.size());
  bool first = true;
  for (const auto& [kind, n] : kinds) {
    std::printf("%s%lld %s", first ? "" : ", ", static_cast<long long>(n), kind.c_str());
    first = false;
  }
  std::printf("), %zu communicator groups\n", set.comm_groups.size());
  for (const std::string& line : w.warnings) std::printf("not modelled: %s\n", line.c_str());
  if (a.output.empty()) return absl::OkStatus();
  // An experiment that simulates the traces: the path as given, relative to the new file.
  namespace fs = std::filesystem;
  const fs::path out(a.output);
  std::error_code ec;
  fs::path traces = fs::absolute(a.traces, ec);
  if (out.has_parent_path()) traces = fs::relative(traces, fs::absolute(out.parent_path(), ec), ec);
  if (ec) traces = fs::absolute(a.traces);
  std::string toml = absl::StrCat(
      "# Simulates the Chakra traces ", a.traces, " (written by testbed import-chakra).\n\n[experiment]\nname = \"",
      fs::path(a.traces).filename().string(), "\"\nbackend = \"sim\"\nmetric = \"iteration_time_s\"\n\n[workload]\n",
      a.astra_text ? "astra_text" : "chakra", " = \"", traces.string(), "\"\n");
  if (a.astra_text) absl::StrAppend(&toml, "ranks = ", a.ranks, "\n");
  absl::StrAppend(&toml, "\n[cluster]\npreset = \"", a.cluster.empty() ? "dgx-a100" : a.cluster, "\"\n");
  if (a.cluster.empty()) {
    absl::StrAppend(&toml, "nodes = ", (set.ranks.size() + 7) / 8, "  # 8 GPUs a node; choose the cluster to simulate on\n");
  }
  absl::StrAppend(&toml, "\n[[arm]]\nname = \"traces\"\n");
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  std::ofstream f(a.output);
  f << toml;
  if (!f) return absl::InternalError(absl::StrCat(a.output, ": cannot write the experiment file"));
  std::printf("wrote %s\n", a.output.c_str());
  return absl::OkStatus();
}

absl::Status Export(Env& env, const ExportChakraArgs& a) {
  TESTBED_ASSIGN_OR_RETURN(ResultsFile::Contents contents, ResultsFile::Read(a.results, false));
  const StoredRun* stored = nullptr;
  for (const StoredRun& r : contents.runs) {
    if (r.id == a.run) stored = &r;
  }
  if (stored == nullptr) {
    std::string ids;
    for (const StoredRun& r : contents.runs) absl::StrAppend(&ids, ids.empty() ? "" : ", ", r.id);
    return absl::NotFoundError(absl::StrCat(a.results, ": no run '", a.run, "' (runs: ", ids, ")"));
  }
  if (stored->backend != "sim") {
    return absl::InvalidArgumentError(absl::StrCat(a.results, ": run '", a.run, "' used backend '", stored->backend,
                                                   "'; only simulated runs have a schedule to export"));
  }
  TESTBED_ASSIGN_OR_RETURN(ConfigDoc doc, ConfigDoc::ParseString(stored->config_toml,
                                                                 absl::StrCat(a.results, " run ", a.run)));
  RunSpec spec;
  spec.id = stored->id;
  spec.arm = stored->arm;
  spec.point = stored->point;
  spec.doc = std::move(doc);
  TESTBED_ASSIGN_OR_RETURN(ResolvedRun run, ResolveRun(spec, *env.registry, *env.presets));
  run.seed = stored->seed;
  TESTBED_ASSIGN_OR_RETURN(RunSchedule rs, BuildRunSchedule(run, *env.registry));
  TESTBED_ASSIGN_OR_RETURN(chakra::ExportedTraces traces,
                           chakra::ExportSchedule(rs.schedule, rs.durations,
                                                  absl::StrCat("testbed export-chakra ", a.results, " --run ", a.run)));
  std::string name = a.run;
  for (char& c : name) {
    if (c == '/' || c == ' ' || c == '@' || c == ',') c = '_';
  }
  const std::string prefix = (std::filesystem::path(a.output) / name).string();
  TESTBED_ASSIGN_OR_RETURN(std::vector<std::string> written, chakra::WriteTraceSet(traces.set, prefix));
  for (const std::string& w : traces.warnings) std::printf("warning: %s\n", w.c_str());
  std::printf("%zu tasks as %zu rank traces under %s (%zu files)\n", rs.schedule.size(), traces.set.ranks.size(),
              prefix.c_str(), written.size());
  return absl::OkStatus();
}

}  // namespace

int ImportChakra(Env& env, const ImportChakraArgs& args) {
  const absl::Status st = Import(env, args);
  return st.ok() ? 0 : Fail(st);
}

int ExportChakra(Env& env, const ExportChakraArgs& args) {
  const absl::Status st = Export(env, args);
  return st.ok() ? 0 : Fail(st);
}

}  // namespace testbed::cli
