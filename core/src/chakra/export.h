// A schedule as Chakra traces, one per device that runs a task: what ASTRA-sim 2.x reads
// (compute nodes with their modelled durations, collectives with "comm_type", "comm_size"
// and "pg_name" over the communicator groups written beside them, sends and receives with
// "comm_src", "comm_dst", "comm_size" and "comm_tag", copies as memory loads and stores),
// plus the attributes of import.h that give back what Chakra's schema has no field for.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chakra/et_trace.h"
#include "testbed/schedule.h"

namespace testbed::chakra {

struct ExportedTraces {
  TraceSet set;
  // What Chakra cannot say: dependencies between tasks of different devices (a trace's
  // dependencies stay within its rank), with counts.
  std::vector<std::string> warnings;
};

// `durations`: seconds of every compute and kernel task (the simulator's TaskCosts), one
// entry per task. Node ids are task ids; each rank lists its tasks in the schedule's
// execution order, so that import runs every stream in the same order.
[[nodiscard]] absl::StatusOr<ExportedTraces> ExportSchedule(const Schedule& schedule, std::span<const double> durations,
                                                            const std::string& description);

}  // namespace testbed::chakra
