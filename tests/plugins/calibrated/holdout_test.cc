// The real test of predicting sizes the file does not contain: refit leaving out every row of
// one hidden size, then predict that hidden size. 2048 held out is interpolation, 1024 and
// 4096 are extrapolation by a factor of two in hidden size (four in GEMM work per token).
//
// Bounds: the median over all held-out predictions under 8% and, on rows >= 2 ms, the worst
// under 20% (looser than in sample: the coefficients now come from two hidden sizes only).
// The worst over all rows is bounded at 60% for the reason given in fit_error_test.cc
// (sub-millisecond rows are host-overhead noise).
#include <cstdio>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "calibration.h"
#include "error_stats.h"

namespace testbed::calibrated {
namespace {

using testing::ErrorOf;
using testing::ErrorStats;
using testing::kLargeRowMs;
using testing::RowError;
using testing::Summarise;

struct HoldoutErrors {
  std::map<OpClass, std::vector<RowError>> all, large;  // over every held-out hidden size
};

// Fits without each hidden size in turn and predicts it; prints one line per (size, op).
HoldoutErrors HoldOut(const std::vector<Measurement>& rows, const CalibrationSetup& setup, bool print) {
  std::set<std::int64_t> hidden_sizes;
  for (const Measurement& m : rows) hidden_sizes.insert(m.hidden);
  HoldoutErrors out;
  for (std::int64_t held : hidden_sizes) {
    std::vector<Measurement> train;
    for (const Measurement& m : rows) {
      if (m.hidden != held) train.push_back(m);
    }
    auto cal = FitCalibration(train, setup);
    EXPECT_TRUE(cal.ok()) << cal.status();
    if (!cal.ok()) return out;
    for (OpClass op : kOpClasses) {
      std::vector<RowError> errors, large_errors;
      for (const Measurement& m : rows) {
        const double measured = MeasuredMs(m, op);
        if (m.hidden != held || !(measured > 0)) continue;
        auto predicted = PredictMeasuredMs(*cal, m, op);
        EXPECT_TRUE(predicted.ok()) << predicted.status();
        if (!predicted.ok()) continue;
        errors.push_back(ErrorOf(m, measured, *predicted));
        if (measured >= kLargeRowMs) large_errors.push_back(errors.back());
      }
      if (print) {
        const ErrorStats s = Summarise(errors), l = Summarise(large_errors);
        std::printf("%-7lld %-8s %5d %7.1f%% %7.1f%% | %5d %7.1f%%   %s\n", static_cast<long long>(held),
                    OpClassName(op), s.rows, s.median_pct, s.worst_pct, l.rows, l.worst_pct, s.worst_row.c_str());
      }
      out.all[op].insert(out.all[op].end(), errors.begin(), errors.end());
      out.large[op].insert(out.large[op].end(), large_errors.begin(), large_errors.end());
    }
  }
  return out;
}

std::vector<Measurement> EmbeddedRows() {
  auto rows = ParseMeasurements(EmbeddedMeasurementsCsv(), kEmbeddedMeasurementsName);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *rows : std::vector<Measurement>{};
}

TEST(CalibratedHoldout, PredictsEachHiddenSizeFromTheOthers) {
  std::printf("\nHold-out: fit without one hidden size, predict it (absolute percentage error)\n");
  std::printf("%-7s %-8s %5s %8s %8s | %5s %8s   worst row\n", "hidden", "op", "rows", "median", "worst", ">=2ms",
              "worst");
  const HoldoutErrors h = HoldOut(EmbeddedRows(), CalibrationSetup{}, true);
  std::printf("All held-out predictions together\n");
  for (OpClass op : kOpClasses) {
    const ErrorStats s = Summarise(h.all.at(op)), l = Summarise(h.large.at(op));
    const std::string name = OpClassName(op);
    std::printf("%-8s %5d rows: median %5.1f%%, worst %5.1f%% | %d rows >= 2 ms: median %5.1f%%, worst %5.1f%%\n",
                name.c_str(), s.rows, s.median_pct, s.worst_pct, l.rows, l.median_pct, l.worst_pct);
    ::testing::Test::RecordProperty(name + "_holdout_median_pct", std::to_string(s.median_pct));
    ::testing::Test::RecordProperty(name + "_holdout_worst_pct", std::to_string(s.worst_pct));
    EXPECT_EQ(s.rows, 82) << name;
    EXPECT_LT(s.median_pct, 8.0) << name;
    EXPECT_LT(s.worst_pct, 60.0) << name << ": " << s.worst_row;
    EXPECT_LT(l.worst_pct, 20.0) << name << ": " << l.worst_row;
  }
}

// What each refinement of the plain FLOP/byte sum buys, measured on the hold-out: the GEMM
// traffic term (size-dependent GEMM efficiency). Printed for the README; the assertion only
// checks that the full model is not worse than the plain sum where it matters, on the
// GPU-bound rows.
TEST(CalibratedHoldout, AblationOfTheGemmTrafficTerm) {
  const std::vector<Measurement> rows = EmbeddedRows();
  CalibrationSetup plain;
  plain.fit_terms[3] = false;  // gemm_io
  const HoldoutErrors full = HoldOut(rows, CalibrationSetup{}, false), sum = HoldOut(rows, plain, false);
  std::printf("\nHold-out with and without the GEMM traffic term: median / worst on rows >= 2 ms\n");
  double full_total = 0, sum_total = 0;
  for (OpClass op : kOpClasses) {
    const ErrorStats f = Summarise(full.large.at(op)), s = Summarise(sum.large.at(op));
    const ErrorStats fa = Summarise(full.all.at(op)), sa = Summarise(sum.all.at(op));
    std::printf("  %-8s without: %4.1f%% / %4.1f%% (all rows median %4.1f%%)   with: %4.1f%% / %4.1f%% (all rows %4.1f%%)\n",
                OpClassName(op), s.median_pct, s.worst_pct, sa.median_pct, f.median_pct, f.worst_pct, fa.median_pct);
    full_total += f.median_pct;
    sum_total += s.median_pct;
  }
  EXPECT_LE(full_total, sum_total);
}

}  // namespace
}  // namespace testbed::calibrated
