// The calibrated model fitted on all measured rows: its coefficients as efficiencies and its
// error on every row, per op class (median and worst absolute percentage error).
//
// Bounds, and why. Above ~2 ms a layer's time is GPU work that the kernel terms describe;
// there the worst error must stay under 15%, about what one expects from a model without
// wave or tile quantisation of GEMMs. Below ~1 ms the time is set by host-side work
// (launching the block's PyTorch ops) that varies from configuration to configuration: the
// file has attention forward at hidden 1024, TP 16, one sequence, at 0.829 ms and the same
// at hidden 2048 (four times the GEMM work) at 0.563 ms, so any model that grows with the
// work misses one of the two by 19% or more (DataNoise below). The worst error over all rows
// is therefore bounded loosely (50%), and the median, set by the many GPU-bound rows,
// tightly (6%).
#include <cstdio>
#include <map>

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

std::vector<Measurement> EmbeddedRows() {
  auto rows = ParseMeasurements(EmbeddedMeasurementsCsv(), kEmbeddedMeasurementsName);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *rows : std::vector<Measurement>{};
}

TEST(CalibratedFit, EfficienciesArePhysical) {
  auto cal = FitCalibration(EmbeddedRows(), CalibrationSetup{});
  ASSERT_TRUE(cal.ok()) << cal.status();
  std::printf("\nFitted on %s (peak %.1f TFLOP/s, %.1f GB/s)\n", cal->setup.device.c_str(),
              cal->setup.peak_flops / 1e12, cal->setup.bandwidth_bytes_per_s / 1e9);
  std::printf("%-8s %5s %10s %12s %10s %10s %14s\n", "op", "rows", "eta_gemm", "eta_batched", "eta_mem", "eta_gemm_io",
              "overhead_us/k");
  auto eta = [](double c) { return c > 0 ? 1.0 / c : 0.0; };  // 0: the term is not used
  for (OpClass op : kOpClasses) {
    const OpCoefficients& c = cal->For(op);
    const int rows = cal->rows_fitted[static_cast<std::size_t>(op)];
    // An MLP has no per-head products: its batched-GEMM coefficient is never used.
    const std::string batched = LayerKindOf(op) == LayerKind::kMlp ? "-" : std::to_string(eta(c.batched_gemm)).substr(0, 5);
    std::printf("%-8s %5d %10.3f %12s %10.3f %10.3f %14.1f\n", OpClassName(op), rows, eta(c.gemm), batched.c_str(),
                eta(c.memory), eta(c.gemm_io), c.kernel_overhead_s * 1e6);
    ::testing::Test::RecordProperty(std::string(OpClassName(op)) + "_eta_gemm", std::to_string(eta(c.gemm)));
    EXPECT_EQ(rows, 82);
    // Large GEMMs on an RTX 3090 reach roughly 40-80% of the FP32-accumulate tensor peak.
    EXPECT_GT(eta(c.gemm), 0.3) << OpClassName(op);
    EXPECT_LE(eta(c.gemm), 1.0) << OpClassName(op);
    EXPECT_LE(eta(c.memory), 1.0) << OpClassName(op);
    EXPECT_LE(eta(c.batched_gemm), 1.0) << OpClassName(op);
    EXPECT_GE(c.gemm_io, 0.0) << OpClassName(op);
    // Per-kernel cost of an eager framework: tens of microseconds, not milliseconds.
    EXPECT_GE(c.kernel_overhead_s, 0.0) << OpClassName(op);
    EXPECT_LT(c.kernel_overhead_s, 200e-6) << OpClassName(op);
  }
}

TEST(CalibratedFit, InSampleErrorPerOpClass) {
  const std::vector<Measurement> rows = EmbeddedRows();
  auto cal = FitCalibration(rows, CalibrationSetup{});
  ASSERT_TRUE(cal.ok()) << cal.status();
  std::printf("\nIn-sample absolute percentage error (all measured rows | rows >= %.0f ms)\n", kLargeRowMs);
  std::printf("%-8s %5s %8s %8s | %5s %8s %8s   worst row\n", "op", "rows", "median", "worst", "rows", "median", "worst");
  for (OpClass op : kOpClasses) {
    std::vector<RowError> all, large;
    for (const Measurement& m : rows) {
      const double measured = MeasuredMs(m, op);
      if (!(measured > 0)) continue;
      auto predicted = PredictMeasuredMs(*cal, m, op);
      ASSERT_TRUE(predicted.ok()) << predicted.status();
      all.push_back(ErrorOf(m, measured, *predicted));
      if (measured >= kLargeRowMs) large.push_back(all.back());
    }
    const ErrorStats s = Summarise(all), l = Summarise(large);
    std::printf("%-8s %5d %7.1f%% %7.1f%% | %5d %7.1f%% %7.1f%%   %s\n", OpClassName(op), s.rows, s.median_pct,
                s.worst_pct, l.rows, l.median_pct, l.worst_pct, s.worst_row.c_str());
    const std::string name = OpClassName(op);
    ::testing::Test::RecordProperty(name + "_median_pct", std::to_string(s.median_pct));
    ::testing::Test::RecordProperty(name + "_worst_pct", std::to_string(s.worst_pct));
    EXPECT_LT(s.median_pct, 6.0) << name;
    EXPECT_LT(s.worst_pct, 50.0) << name << ": " << s.worst_row;
    EXPECT_LT(l.worst_pct, 15.0) << name << ": " << l.worst_row;
  }
}

// How noisy the measurements are: pairs of rows where more work (twice the micro-batch, or
// twice the hidden size at the same TP degree and micro-batch) took less time. No model that
// grows with the work can fit both rows of such a pair; the best it can do leaves an error
// of (a - b) / (a + b) on one of them.
TEST(CalibratedFit, DataNoise) {
  const std::vector<Measurement> rows = EmbeddedRows();
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, const Measurement*> by_key;
  for (const Measurement& m : rows) by_key[{m.hidden, m.tp, m.micro_batch}] = &m;
  std::printf("\nRows where more work took less time (measurement noise)\n");
  double worst_floor = 0;
  int inversions = 0;
  for (OpClass op : kOpClasses) {
    for (const Measurement& m : rows) {
      const std::tuple<std::int64_t, std::int64_t, std::int64_t> bigger[] = {
          {m.hidden, m.tp, m.micro_batch * 2}, {m.hidden * 2, m.tp, m.micro_batch}};
      for (const auto& key : bigger) {
        auto next = by_key.find(key);
        if (next == by_key.end()) continue;
        const Measurement& n = *next->second;
        const double a = MeasuredMs(m, op), b = MeasuredMs(n, op);
        if (!(a > 0 && b > 0 && b < a)) continue;
        const double floor = 100.0 * (a - b) / (a + b);
        std::printf("  %-8s hidden %lld tp %lld mb %lld: %.3f ms; hidden %lld mb %lld: %.3f ms -> >= %.1f%% on one\n",
                    OpClassName(op), static_cast<long long>(m.hidden), static_cast<long long>(m.tp),
                    static_cast<long long>(m.micro_batch), a, static_cast<long long>(n.hidden),
                    static_cast<long long>(n.micro_batch), b, floor);
        worst_floor = std::max(worst_floor, floor);
        ++inversions;
        EXPECT_LT(a, kLargeRowMs) << "an inversion above 2 ms would contradict the bounds' reasoning";
      }
    }
  }
  std::printf("  %d inversions; the worst forces an error of at least %.1f%% on some row\n", inversions, worst_floor);
  ::testing::Test::RecordProperty("work_inversions", std::to_string(inversions));
  EXPECT_GT(inversions, 0);
}

}  // namespace
}  // namespace testbed::calibrated
