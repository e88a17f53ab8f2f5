// Chrome trace-event JSON (the format Perfetto and chrome://tracing open) from a run's
// timeline table: one process per device, one thread per stream.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "testbed/metrics.h"

namespace testbed {

// `timeline` must have the columns written by the simulator: device, stream, stream_name,
// start_s, end_s, kind, label. Errors name the missing column.
[[nodiscard]] absl::StatusOr<std::string> ChromeTraceJson(const Table& timeline, const std::string& run_id);

}  // namespace testbed
