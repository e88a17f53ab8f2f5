// `testbed compare old.h5 new.h5`: what a change did to every number (results/compare.h).
// Exit status 0 when nothing moved beyond the tolerance, 3 when something did (or a run is
// in one file only, or its status or configuration changed), 1 on an unreadable file.
#pragma once

#include <string>

namespace testbed::cli {

struct CompareArgs {
  std::string old_file, new_file;
  double tolerance = 1e-9;
  bool all = false;  // also the testbed's own wall-clock and memory figures
};

int Compare(const CompareArgs& args);

}  // namespace testbed::cli
