// `testbed report results/*.h5 [--html] [--figures DIR] > REPORT.md`: which papers' figures the
// testbed reproduces and how closely (results/repro_report.h), with each file's main figure
// drawn by `testbed plot` into DIR/<experiment>/ and embedded when --figures is given.
#pragma once

#include <string>
#include <vector>

namespace testbed::cli {

struct ReportArgs {
  std::vector<std::string> files;
  bool html = false;
  std::string figures;  // "" : no figures
  double tolerance = 0.15;
  std::string python;
};

int Report(const ReportArgs& args);

}  // namespace testbed::cli
