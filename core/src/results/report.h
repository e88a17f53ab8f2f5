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
  // Rows that summarise several seeds (SummariseSeeds): the sample standard deviation of
  // `value` and how many seeds' runs the means are over.
  std::optional<double> stddev;
  int samples = 1;
  // The header's extra columns, in its order (means over seeds in summarised rows).
  std::vector<std::optional<double>> columns;
};

// The sweep key whose values are seeds: runs that differ only in it are repetitions.
inline constexpr const char* kSeedSweepKey = "experiment.seed";

// When the experiment sweeps kSeedSweepKey, one row per (point without the seed, arm) with
// the mean of value, speedup (each seed's against the same seed's baseline), ratio and the
// extra columns over its ok runs, and the standard deviation of value; failed runs stay rows of their own.
// Otherwise `rows` as they are.
[[nodiscard]] std::vector<ReportRow> SummariseSeeds(const ResultsHeader& header, const std::vector<ReportRow>& rows);

// Rows in table order (sweep point, then arm). `runs` may hold runs of any subset of arms.
[[nodiscard]] std::vector<ReportRow> BuildReport(const ResultsHeader& header, const std::vector<StoredRun>& runs);
// Aligned text table (seeds summarised as mean ± standard deviation), with failed runs'
// errors listed underneath.
[[nodiscard]] std::string FormatReport(const ResultsHeader& header, const std::vector<ReportRow>& rows);
// CSV: run,arm,point,metric,value,unit,speedup,reference,ratio (RFC 4180 quoting).
[[nodiscard]] std::string FormatReportCsv(const std::vector<ReportRow>& rows);

}  // namespace testbed
