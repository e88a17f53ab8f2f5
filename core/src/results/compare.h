// What changed between two results files (`testbed compare old.h5 new.h5`): runs matched by
// id; for each run in both, every metric whose value moved (absolute and relative
// difference, flagged beyond the tolerance), metrics only in one, a changed status, and a
// changed configuration (its hash, and the lines of the run's TOML that differ); runs only
// in one file. Metrics that measure the testbed itself rather than the experiment (wall-clock
// and memory of the tool: SelfMeasured) are left out unless asked for.
#pragma once

#include <string>
#include <vector>

#include "results/results_file.h"

namespace testbed {

struct CompareOptions {
  double tolerance = 1e-9;  // relative: |new - old| / max(|old|, |new|) above it is flagged
  bool self_measured = false;  // also compare SelfMeasured metrics
};

struct MetricChange {
  std::string run, metric, unit;
  double old_value = 0, new_value = 0;
  bool in_old = true, in_new = true;
  [[nodiscard]] double Absolute() const noexcept;
  [[nodiscard]] double Relative() const noexcept;
  bool flagged = false;
};

struct RunChange {
  std::string run;
  std::string old_status, new_status;           // set when they differ
  std::vector<std::string> removed_lines, added_lines;  // of the configuration, when its hash differs
};

struct Comparison {
  std::string old_experiment, new_experiment;
  std::vector<std::string> only_old, only_new;  // run ids
  std::vector<RunChange> runs;                  // status or configuration changed
  std::vector<MetricChange> metrics;            // values that moved (or exist in one file only)
  int compared_runs = 0, compared_metrics = 0;

  // Anything flagged, a run in one file only, a status or configuration change.
  [[nodiscard]] bool Differs() const noexcept;
};

// Wall-clock and memory figures of the testbed's own work: schedule_build_s,
// simulation_wall_s, simulator_memory_mib, process_peak_memory_mib, planning_time_s, the
// planning kinds' <kind>_time_s, tp_planning_s, balancer_search_s_per_call, duplicate_detection_s_per_step
// and the measured_* figures of real runs.
[[nodiscard]] bool SelfMeasured(const std::string& metric);

[[nodiscard]] Comparison CompareResults(const ResultsFile::Contents& old_file, const ResultsFile::Contents& new_file,
                                        const CompareOptions& options);

}  // namespace testbed
