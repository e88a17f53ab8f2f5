// What `testbed plot` hands the plotting script (tools/plot.py): a results file's header and
// runs as one JSON document, read with the core's reader (so a corrupt file is refused here,
// by name, before Python sees it). Per run: id, arm, point, status, error, every metric as
// [value, unit], and its tables (all but the per-task timeline) as {column: {unit, values}}
// in column order. Numbers that are not finite become null.
#pragma once

#include <string>

#include "results/results_file.h"

namespace testbed {

[[nodiscard]] std::string PlotDataJson(const ResultsFile::Contents& contents);

}  // namespace testbed
