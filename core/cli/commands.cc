#include "cli/commands.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "config/experiment.h"
#include "engine/runner.h"
#include "results/chrome_trace.h"
#include "results/report.h"
#include "results/results_file.h"

namespace testbed::cli {
namespace {

std::filesystem::path SelfExe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path("testbed") : p;
}

void ReportPluginFailures(const Env& env) {
  for (const PluginFailure& f : env.loader->failures()) {
    std::fprintf(stderr, "warning: plugin not loaded: %s\n", f.error.c_str());
  }
}

}  // namespace

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
  return 1;
}

std::string VersionString() { return absl::StrCat("testbed ", TESTBED_VERSION_STRING, " (", GitRevision(), ")"); }

Env MakeEnv() {
  Env env;
  env.registry = std::make_unique<Registry>();
  env.loader = std::make_unique<PluginLoader>(*env.registry);
  const auto exe = SelfExe();
  auto dirs = PluginLoader::DefaultSearchPath(exe);
  for (const auto& d : dirs) env.plugin_dirs.push_back(d.string());
  env.loader->LoadDirectories(dirs);
  env.presets = std::make_unique<PresetLibrary>(PresetLibrary::DefaultRoots(exe));
  return env;
}

int Run(Env& env, const RunArgs& args) {
  ReportPluginFailures(env);
  auto ex = Experiment::Load(args.file, args.sets);
  if (!ex.ok()) return Fail(ex.status());
  RunnerOptions opts;
  opts.jobs = args.jobs;
  opts.only_arms = args.only;
  opts.only_points = args.points;
  opts.dry_run = args.dry_run;
  opts.fresh = args.fresh;
  opts.output = args.output;
  opts.progress = args.quiet ? nullptr : stderr;
  if (!args.shard.empty()) {
    auto shard = ParseShard(args.shard);
    if (!shard.ok()) return Fail(shard.status());
    opts.shard_index = shard->first;
    opts.shard_count = shard->second;
  }
  auto summary = RunExperiment(*ex, *env.registry, *env.presets, opts);
  if (!summary.ok()) return Fail(summary.status());
  if (summary->output.empty() || summary->table.empty()) {
    // A secondary process under mpirun: the first one reports.
    return summary->failed > 0 ? 1 : 0;
  }
  std::fputs(summary->table.c_str(), stdout);
  if (args.dry_run) return 0;
  std::fprintf(stdout, "\n%d runs: %d ran, %d already in %s, %d failed\n", summary->total, summary->ran,
               summary->skipped, summary->output.c_str(), summary->failed);
  return summary->failed > 0 ? 1 : 0;
}

int Validate(Env& env, const ValidateArgs& args) {
  ReportPluginFailures(env);
  auto ex = Experiment::Load(args.file, args.sets);
  if (!ex.ok()) return Fail(ex.status());
  auto runs = ResolveAll(*ex, *env.registry, *env.presets, {});
  if (!runs.ok()) return Fail(runs.status());
  std::fprintf(stdout, "%s: OK: %zu arms x %zu points = %zu runs\n", args.file.c_str(), ex->arms().size(),
               ex->points().size(), runs->size());
  return 0;
}

int Plugins(Env& env, const PluginsArgs& args) {
  std::optional<ComponentKind> only;
  if (!args.kind.empty()) {
    only = KindFromName(args.kind);
    if (!only) return Fail(absl::InvalidArgumentError(absl::StrCat("--kind ", args.kind, ": unknown kind")));
  }
  std::printf("Plugin search path: %s\n\n", absl::StrJoin(env.plugin_dirs, ":").c_str());
  std::printf("Plugin libraries (%zu):\n", env.loader->loaded().size());
  for (const LoadedPlugin& p : env.loader->loaded()) {
    std::printf("  %-16s %-8s %s\n      %s\n", p.name.c_str(), p.version.c_str(), p.path.c_str(), p.description.c_str());
  }
  if (!env.loader->failures().empty()) {
    std::printf("\nNot loaded (%zu):\n", env.loader->failures().size());
    for (const PluginFailure& f : env.loader->failures()) std::printf("  %s\n", f.error.c_str());
  }
  std::printf("\nComponents:\n");
  for (ComponentKind kind : kAllComponentKinds) {
    if (only && *only != kind) continue;
    for (const ComponentEntry* e : env.registry->List(kind)) {
      std::printf("\n  %s %s  (plugin %s)\n      %s\n", std::string(KindName(kind)).c_str(), e->decl.name.c_str(),
                  e->plugin.c_str(), e->decl.doc.c_str());
      for (const ParamSpec& p : e->decl.params) {
        std::string type = ParamTypeName(p.type());
        if (!p.choices().empty()) type = absl::StrCat("{", absl::StrJoin(p.choices(), "|"), "}");
        std::string range;
        if (p.min() || p.max()) {
          range = absl::StrCat(" [", p.min() ? absl::StrFormat("%g", *p.min()) : "", "..",
                               p.max() ? absl::StrFormat("%g", *p.max()) : "", "]");
        }
        std::printf("      %-20s %-14s default %-12s %-10s %s%s\n", p.name().c_str(), type.c_str(),
                    p.required() ? "(required)" : FormatParamValue(p.default_value()).c_str(),
                    p.unit().empty() ? "" : absl::StrCat("[", p.unit(), "]").c_str(), p.doc().c_str(), range.c_str());
      }
    }
  }
  return 0;
}

int Show(const ShowArgs& args) {
  auto contents = ResultsFile::Read(args.file, /*with_tables=*/false);
  if (!contents.ok()) return Fail(contents.status());
  if (!args.run.empty()) {
    for (const StoredRun& r : contents->runs) {
      if (r.id != args.run && absl::StrCat(r.index) != args.run) continue;
      std::printf("run %s (index %d)  arm %s  point %s  status %s\n", r.id.c_str(), r.index, r.arm.c_str(),
                  r.point.c_str(), r.status.c_str());
      if (!r.error.empty()) std::printf("error: %s\n", r.error.c_str());
      std::printf("seed %llu  backend %s  revision %s  started %s  wall %.3f s\n",
                  static_cast<unsigned long long>(r.seed), r.backend.c_str(), r.git_revision.c_str(),
                  r.start_time.c_str(), r.wall_time_s);
      for (const Metric& m : r.output.metrics.all()) {
        std::printf(args.exact ? "  %-32s %24.17g  %s\n" : "  %-32s %16.6g  %s\n", m.name.c_str(), m.value, m.unit.c_str());
      }
      for (const std::string& n : r.output.notes) std::printf("note: %s\n", n.c_str());
      return 0;
    }
    return Fail(absl::NotFoundError(absl::StrCat(args.file, ": no run '", args.run, "'")));
  }
  auto rows = BuildReport(contents->header, contents->runs);
  if (args.csv) {
    std::fputs(FormatReportCsv(rows).c_str(), stdout);
  } else {
    std::fputs(FormatReport(contents->header, rows).c_str(), stdout);
  }
  return 0;
}

}  // namespace testbed::cli

namespace testbed::cli {

int Compact(const std::string& file) {
  auto done = ResultsFile::Compact(file);
  if (!done.ok()) return Fail(done.status());
  std::printf("%s: %d runs, %.1f MB -> %.1f MB\n", file.c_str(), done->runs, done->bytes_before / 1e6,
              done->bytes_after / 1e6);
  return 0;
}

int Trace(const TraceArgs& args) {
  auto contents = ResultsFile::Read(args.file, /*with_tables=*/true);
  if (!contents.ok()) return Fail(contents.status());
  for (const StoredRun& r : contents->runs) {
    if (r.id != args.run && absl::StrCat(r.index) != args.run) continue;
    for (const Table& t : r.output.tables) {
      if (t.name != "timeline") continue;
      auto json = ChromeTraceJson(t, r.id);
      if (!json.ok()) return Fail(json.status());
      std::fputs(json->c_str(), stdout);
      return 0;
    }
    return Fail(absl::NotFoundError(absl::StrCat(args.file, ": run '", r.id, "' has no timeline (",
                                                 r.status == "ok" ? "it was not recorded: set [experiment] timeline = \"on\""
                                                                  : "the run failed",
                                                 ")")));
  }
  std::vector<std::string> ids;
  for (const StoredRun& r : contents->runs) ids.push_back(r.id);
  return Fail(absl::NotFoundError(absl::StrCat(args.file, ": no run '", args.run, "'; runs: ", absl::StrJoin(ids, ", "))));
}

}  // namespace testbed::cli
