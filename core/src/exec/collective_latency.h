// The fixed cost of a collective between the executor's ranks, measured: the simulator's
// prediction of a real run uses it as the latency of the links between ranks, instead of a
// guess (thread hand-offs and process wake-ups cost far more than a memory copy of a few bytes).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/communicator.h"

namespace testbed::exec {

// Median seconds of a one-element all-reduce over the world group, as seen by the first
// endpoint; every endpoint of this process takes part from its own thread (under MPI each
// process calls this with its one endpoint). 0 for a world of one.
[[nodiscard]] absl::StatusOr<double> MeasureAllReduceLatency(std::vector<std::unique_ptr<CommGroup>>& endpoints,
                                                             int repeats);

}  // namespace testbed::exec
