// The summary table of an experiment: one row per run with the main metric, the speedup
// over the first arm at the same sweep point, the paper's figure and ours / paper. Printed
// at the end of `testbed run`, by `testbed show`, and as CSV by `testbed show --csv`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "results/results_file.h"

namespace testbed {

struct ReportRow {
  std::string run;
  std::string arm;
  std::string point;
  std::string status;
  std::string error;
  std::string metric;
  std::optional<double> value;
  std::string unit;
  std::optional<double> speedup;
  std::optional<double> reference;
  std::optional<double> ratio;
};

// Rows in table order (sweep point, then arm). `runs` may hold runs of any subset of arms.
[[nodiscard]] std::vector<ReportRow> BuildReport(const ResultsHeader& header, const std::vector<StoredRun>& runs);
// Aligned text table, with failed runs' errors listed underneath.
[[nodiscard]] std::string FormatReport(const ResultsHeader& header, const std::vector<ReportRow>& rows);
// CSV: run,arm,point,metric,value,unit,speedup,reference,ratio (RFC 4180 quoting).
[[nodiscard]] std::string FormatReportCsv(const std::vector<ReportRow>& rows);

}  // namespace testbed
