// Simulated or planned runs shared by the processes of one mpirun job (engine/run_claims.h):
// each process takes the next run from the claims file, runs it and appends it to the results
// file; the first process moves the old file aside (--fresh) before the others open it,
// waits for every process to be done and builds the table from the file. The results are
// those of one process, run for run (each run is deterministic given its seed).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/experiment.h"
#include "config/run_config.h"
#include "engine/runner.h"
#include "results/results_file.h"
#include "testbed/registry.h"

namespace testbed {

struct SharedJob {
  int rank = 0;
  int size = 1;
  std::string job;  // RunClaims::JobId()
};

// `summary` comes with total and output set; processes other than the first return it
// without a table.
[[nodiscard]] absl::StatusOr<RunnerSummary> RunShared(const Experiment& experiment, const ResultsHeader& header,
                                                      const std::vector<ResolvedRun>& runs, const Registry& registry,
                                                      const RunnerOptions& options, const SharedJob& job,
                                                      RunnerSummary summary);

}  // namespace testbed
