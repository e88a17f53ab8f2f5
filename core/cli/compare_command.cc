#include "cli/compare_command.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "results/compare.h"
#include "results/results_file.h"

namespace testbed::cli {

int Compare(const CompareArgs& args) {
  auto a = ResultsFile::Read(args.old_file, false);
  if (!a.ok()) return Fail(a.status());
  auto b = ResultsFile::Read(args.new_file, false);
  if (!b.ok()) return Fail(b.status());
  CompareOptions options;
  options.tolerance = args.tolerance;
  options.self_measured = args.all;
  const Comparison c = CompareResults(*a, *b, options);
  std::printf("%s (experiment %s, %zu runs) -> %s (experiment %s, %zu runs)\n", args.old_file.c_str(),
              c.old_experiment.c_str(), a->runs.size(), args.new_file.c_str(), c.new_experiment.c_str(), b->runs.size());
  if (c.old_experiment != c.new_experiment) std::printf("note: the files hold different experiments\n");
  for (const std::string& id : c.only_old) std::printf("only in %s: %s\n", args.old_file.c_str(), id.c_str());
  for (const std::string& id : c.only_new) std::printf("only in %s: %s\n", args.new_file.c_str(), id.c_str());
  for (const RunChange& r : c.runs) {
    if (!r.old_status.empty()) std::printf("%s: status %s -> %s\n", r.run.c_str(), r.old_status.c_str(), r.new_status.c_str());
    if (!r.removed_lines.empty() || !r.added_lines.empty()) {
      std::printf("%s: configuration changed\n", r.run.c_str());
      for (const std::string& l : r.removed_lines) std::printf("  - %s\n", l.c_str());
      for (const std::string& l : r.added_lines) std::printf("  + %s\n", l.c_str());
    } else if (r.old_status.empty()) {
      std::printf("%s: configuration hash changed\n", r.run.c_str());
    }
  }
  int flagged = 0;
  if (!c.metrics.empty()) {
    std::printf("%-32s %-34s %17s %17s %12s %10s\n", "run", "metric", "old", "new", "abs diff", "rel diff");
    for (const MetricChange& m : c.metrics) {
      flagged += m.flagged ? 1 : 0;
      const std::string o = m.in_old ? absl::StrFormat("%.10g", m.old_value) : "(absent)";
      const std::string n = m.in_new ? absl::StrFormat("%.10g", m.new_value) : "(absent)";
      const std::string ad = m.in_old && m.in_new ? absl::StrFormat("%.4g", m.Absolute()) : "";
      const std::string rd = m.in_old && m.in_new ? absl::StrFormat("%.3g", m.Relative()) : "";
      std::printf("%-32s %-34s %17s %17s %12s %10s%s\n", m.run.c_str(), m.metric.c_str(), o.c_str(), n.c_str(), ad.c_str(),
                  rd.c_str(), m.flagged ? "  *" : "");
    }
  }
  std::printf("%d runs and %d metrics compared%s: %zu changed, %d beyond the tolerance %g (*); %zu runs in one file only\n",
              c.compared_runs, c.compared_metrics, args.all ? "" : " (the testbed's own timings left out; --all adds them)",
              c.metrics.size(), flagged, args.tolerance, c.only_old.size() + c.only_new.size());
  return c.Differs() ? 3 : 0;
}

}  // namespace testbed::cli
