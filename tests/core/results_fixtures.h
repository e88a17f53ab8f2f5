// Results-file headers for the results tests: the fields a file needs, the rest empty.
#pragma once

#include <string>
#include <vector>

#include "results/results_file.h"

namespace testbed::testing {

inline ResultsHeader MinimalHeader(const std::string& experiment, const std::string& backend, const std::string& metric,
                                   std::vector<std::string> arms, std::vector<std::string> points) {
  ResultsHeader h;
  h.experiment = experiment;
  h.backend = backend;
  h.metric = metric;
  h.arms = std::move(arms);
  h.points = std::move(points);
  return h;
}

}  // namespace testbed::testing
