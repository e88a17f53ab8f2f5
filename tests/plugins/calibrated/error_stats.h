// Helpers shared by the calibrated model's tests: absolute percentage errors of the fitted
// model against the measured rows, summarised as median and worst, and printed as tables.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "calibration.h"

namespace testbed::calibrated::testing {

struct ErrorStats {
  int rows = 0;
  double median_pct = 0;
  double worst_pct = 0;
  std::string worst_row;  // "hidden 1024 tp 16 mb 1: 0.829 ms measured, 0.477 predicted"
};

// One error with the row it belongs to.
struct RowError {
  double pct = 0;
  std::string row;
};

inline ErrorStats Summarise(std::vector<RowError> errors) {
  ErrorStats s;
  s.rows = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  std::vector<double> pct;
  for (const RowError& e : errors) pct.push_back(e.pct);
  std::sort(pct.begin(), pct.end());
  const std::size_t n = pct.size();
  s.median_pct = n % 2 == 1 ? pct[n / 2] : 0.5 * (pct[n / 2 - 1] + pct[n / 2]);
  auto worst = std::max_element(errors.begin(), errors.end(),
                                [](const RowError& a, const RowError& b) { return a.pct < b.pct; });
  s.worst_pct = worst->pct;
  s.worst_row = worst->row;
  return s;
}

inline RowError ErrorOf(const Measurement& m, double measured_ms, double predicted_ms) {
  char row[160];
  std::snprintf(row, sizeof(row), "hidden %lld tp %lld mb %lld: %.3f ms measured, %.3f predicted",
                static_cast<long long>(m.hidden), static_cast<long long>(m.tp), static_cast<long long>(m.micro_batch),
                measured_ms, predicted_ms);
  return {100.0 * std::abs(predicted_ms - measured_ms) / measured_ms, row};
}

// Rows measured at or above this time are past the regime where host overhead and timing
// jitter dominate (see fit_error_test.cc).
inline constexpr double kLargeRowMs = 2.0;

}  // namespace testbed::calibrated::testing
