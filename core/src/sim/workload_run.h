// Backend "sim" on a traced job: `[workload] chakra = "<prefix or directory>"` (Chakra
// execution traces, one per rank) or `astra_text = "<file>"` (an ASTRA-sim text workload)
// instead of a model, a plan and a scheduler. The traces become a schedule
// (chakra/import.h) that runs on the run's cluster, device model and collective; rank r is
// device r. The usual metrics and tables follow, less those that need a model (FLOP/s, MFU,
// tokens/s); what the traces hold that the schedule does not model is in the run's notes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chakra/import.h"
#include "config/run_config.h"
#include "sim/sim_backend.h"
#include "testbed/param_spec.h"

namespace testbed {

[[nodiscard]] const std::vector<ParamSpec>& WorkloadSchema();
// The keys of [workload] that make a run a traced one (it then needs no [model]).
[[nodiscard]] const std::vector<std::string>& WorkloadKeys();

// The run's traces as a schedule (with the import's warnings).
[[nodiscard]] absl::StatusOr<chakra::ImportedWorkload> LoadWorkload(const ResolvedRun& run);
// Simulates it with the prepared run's components and settings.
[[nodiscard]] absl::StatusOr<RunOutput> SimulateWorkload(const ResolvedRun& run, SimRun& prepared);

}  // namespace testbed
