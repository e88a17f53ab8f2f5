// Runs an experiment: resolves every run up front (so a bad key fails before anything
// runs), skips runs already completed in the results file with the same configuration,
// runs the rest (in parallel with -j N), records each run the moment it finishes, and
// prints the summary table.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/experiment.h"
#include "config/run_config.h"
#include "config/preset_library.h"
#include "results/report.h"
#include "testbed/registry.h"

namespace testbed {

struct RunnerOptions {
  int jobs = 1;
  std::vector<std::string> only_arms;    // empty: all arms
  std::vector<std::string> only_points;  // empty: all points (names as in run ids: "<arm>@<point>")
  bool dry_run = false;
  bool fresh = false;    // start a new results file (the old one is kept as a backup)
  std::string output;    // overrides [experiment] output
  std::FILE* progress = stderr;
};

struct RunnerSummary {
  int total = 0;
  int skipped = 0;  // already in the results file
  int ran = 0;
  int failed = 0;
  std::string output;
  std::vector<ReportRow> rows;
  std::string table;  // the formatted summary
};

// Errors are returned for problems that stop the whole experiment (invalid configuration,
// unusable results file). A run that fails is recorded and counted in `failed`.
[[nodiscard]] absl::StatusOr<RunnerSummary> RunExperiment(const Experiment& experiment, const Registry& registry,
                                                          const PresetLibrary& presets, const RunnerOptions& options);

// Resolves every run of the experiment (what `testbed validate` does).
[[nodiscard]] absl::StatusOr<std::vector<ResolvedRun>> ResolveAll(const Experiment& experiment,
                                                                  const Registry& registry,
                                                                  const PresetLibrary& presets,
                                                                  const std::vector<std::string>& only_arms,
                                                                  const std::vector<std::string>& only_points = {});

// The revision of the source tree the binary was built from ("<sha>[-dirty]" or "unknown").
[[nodiscard]] const char* GitRevision() noexcept;

}  // namespace testbed
