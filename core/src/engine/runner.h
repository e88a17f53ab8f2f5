// Runs an experiment: resolves every run up front (so a bad key fails before anything
// runs), skips runs already completed in the results file with the same configuration,
// runs the rest (in parallel with -j N), records each run the moment it finishes, and
// prints the summary table.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
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
  // Part shard_index (0-based) of shard_count: the selected runs dealt in turn, run into their
  // own file (the output, or [experiment] output with ".shard-K-of-N" before its extension).
  int shard_index = 0;
  int shard_count = 1;
};

// "K/N" with 0 <= K < N: (K, N); InvalidArgument otherwise, saying what was expected.
[[nodiscard]] absl::StatusOr<std::pair<int, int>> ParseShard(const std::string& text);
// The results file of a shard: `output` with ".shard-K-of-N" before its extension.
[[nodiscard]] std::string ShardOutput(const std::string& output, int index, int count);

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
