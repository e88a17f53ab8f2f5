// Running one resolved run and what the runner needs around it: whether a stored run is the
// same run done before, the interrupt flag that Ctrl-C sets, and the signal handler.
#pragma once

#include <atomic>

#include "config/experiment.h"
#include "config/run_config.h"
#include "engine/runner.h"
#include "results/results_file.h"
#include "testbed/registry.h"

namespace testbed {

// Set by the first Ctrl-C (or SIGTERM) until the runner clears it.
extern std::atomic<bool> g_interrupted;
// The first signal stops the experiment after the runs in progress are cancelled (a
// simulation polls for it); a second one ends the process at once (every write is atomic, so
// the results file keeps every completed run).
void OnSignal(int sig);

// Whether `stored` is `run` done before: the same id and configuration, finished, and made
// with the same component libraries (a file written before libraries were recorded matches).
[[nodiscard]] bool AlreadyDone(const StoredRun& stored, const ResolvedRun& run);

// Runs `run` with its backend; a failure is recorded in the result ("failed"), an interrupt
// gives "cancelled" (not a result: it is not recorded, and reruns).
[[nodiscard]] StoredRun Execute(const ResolvedRun& run, const Registry& registry);

// The summary table of `runs` as `stored` (a results file's runs) holds them; an error when
// no run reports the experiment's metric (naming what they report).
[[nodiscard]] absl::Status Tabulate(const Experiment& experiment, const ResultsHeader& header,
                                    const std::vector<ResolvedRun>& runs, const std::vector<StoredRun>& stored,
                                    RunnerSummary& summary);

}  // namespace testbed
