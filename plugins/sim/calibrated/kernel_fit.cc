#include "kernel_fit.h"

#include <algorithm>
#include <array>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "nnls.h"

namespace testbed::calibrated {
namespace {

bool Used(const KernelFitSetup& setup, const KernelBenchRow& r) { return !setup.use || setup.use(r); }

// Features of a row on the setup's device: FLOPs / peak, bytes / bandwidth, 1.
std::array<double, 3> Features(const KernelFitSetup& setup, const KernelBenchRow& r) {
  return {r.Flops() / setup.Peak(r.precision), r.Bytes() / setup.bandwidth_bytes_per_s, 1.0};
}

// min sum ((sum_j c_j f_ij) / t_i - 1)^2 over the terms in `fit` (others fixed at `fixed`),
// c_0 >= `min_compute`, the rest >= 0. Columns are scaled to unit norm.
template <std::size_t N>
absl::StatusOr<std::array<double, N>> FitRelative(const std::vector<std::array<double, N>>& x,
                                                  const std::vector<double>& t, const std::array<bool, N>& fit,
                                                  const std::array<double, N>& fixed, double min_compute) {
  const auto rows = static_cast<Eigen::Index>(t.size());
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(rows, static_cast<Eigen::Index>(N));
  Eigen::VectorXd b(rows);
  std::array<double, N> lower{};
  lower[0] = min_compute;
  for (Eigen::Index i = 0; i < rows; ++i) {
    double rest = 1.0;
    for (std::size_t j = 0; j < N; ++j) {
      const double v = x[static_cast<std::size_t>(i)][j] / t[static_cast<std::size_t>(i)];
      if (fit[j]) {
        a(i, static_cast<Eigen::Index>(j)) = v;
        rest -= lower[j] * v;
      } else {
        rest -= fixed[j] * v;
      }
    }
    b[i] = rest;
  }
  std::array<double, N> scale{};
  for (std::size_t j = 0; j < N; ++j) {
    const double norm = a.col(static_cast<Eigen::Index>(j)).norm();
    scale[j] = norm > 0 ? norm : 1.0;
    a.col(static_cast<Eigen::Index>(j)) /= scale[j];
  }
  auto d = SolveNnls(a, b);
  if (!d.ok()) return d.status();
  std::array<double, N> c{};
  for (std::size_t j = 0; j < N; ++j) {
    c[j] = fit[j] ? lower[j] + (*d)[static_cast<Eigen::Index>(j)] / scale[j] : fixed[j];
  }
  return c;
}

// A class's ceiling: the largest fraction of the peak its measurements reach.
double BestFraction(const std::vector<std::array<double, 3>>& x, const std::vector<double>& t) {
  double best = 0;
  for (std::size_t i = 0; i < t.size(); ++i) best = std::max(best, x[i][0] / t[i]);
  return std::min(best, 1.0);
}

absl::Status TooFew(const char* what, std::size_t have, int need) {
  return absl::FailedPreconditionError(
      absl::StrCat("calibrated.kernels: ", have, " ", what, " rows, at least ", need, " are needed to fit them"));
}

}  // namespace

double KernelFit::Predict(const KernelBenchRow& row) const noexcept {
  const double peak = setup.Peak(row.precision), bw = setup.bandwidth_bytes_per_s;
  if (row.kind == BenchKind::kFlashForward) return flash_forward.Time(row.Flops(), peak, row.Bytes(), bw);
  KernelTerms terms = gemm;
  if (row.precision == Precision::kFp8) {
    terms.compute = gemm_fp8_compute;
    terms.ceiling = gemm_fp8_ceiling;
  }
  return terms.Time(row.Flops(), peak, row.Bytes(), bw);
}

absl::StatusOr<KernelFit> FitKernels(const std::vector<KernelBenchRow>& rows, const KernelFitSetup& setup) {
  if (!(setup.peak_bf16_flops > 0) || !(setup.peak_fp8_flops > 0) || !(setup.bandwidth_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(
        "calibrated.kernels: the measured device's peaks (BF16, FP8) and memory bandwidth must be positive");
  }
  KernelFit fit;
  fit.setup = setup;
  std::vector<std::array<double, 3>> gemm_x, fp8_x, flash_x;
  std::vector<double> gemm_t, fp8_t, flash_t;
  for (const KernelBenchRow& r : rows) {
    if (!Used(setup, r)) continue;
    if (r.kind == BenchKind::kGemm && r.precision == Precision::kFp8) {
      fp8_x.push_back(Features(setup, r));
      fp8_t.push_back(r.MeasuredSeconds());
    } else if (r.kind == BenchKind::kGemm) {
      gemm_x.push_back(Features(setup, r));
      gemm_t.push_back(r.MeasuredSeconds());
    } else if (r.impl == setup.flash_impl) {
      flash_x.push_back(Features(setup, r));
      flash_t.push_back(r.MeasuredSeconds());
    }
  }
  fit.gemm_rows = static_cast<int>(gemm_t.size());
  fit.gemm_fp8_rows = static_cast<int>(fp8_t.size());
  fit.flash_rows = static_cast<int>(flash_t.size());
  if (gemm_t.size() < 3) return TooFew("BF16/FP16 GEMM", gemm_t.size(), 3);
  if (fp8_t.empty()) return TooFew("FP8 GEMM", 0, 1);
  if (flash_t.size() < 2) return TooFew(absl::StrCat("FlashAttention (", setup.flash_impl, ")").c_str(), flash_t.size(), 2);

  auto g = FitRelative<3>(gemm_x, gemm_t, {true, true, true}, {}, 1.0);
  if (!g.ok()) return g.status();
  fit.gemm = KernelTerms{(*g)[0], (*g)[1], (*g)[2], BestFraction(gemm_x, gemm_t)};
  auto f8 = FitRelative<3>(fp8_x, fp8_t, {true, false, false}, {1.0, fit.gemm.traffic, fit.gemm.overhead_s}, 1.0);
  if (!f8.ok()) return f8.status();
  fit.gemm_fp8_compute = (*f8)[0];
  fit.gemm_fp8_ceiling = BestFraction(fp8_x, fp8_t);
  auto fa = FitRelative<3>(flash_x, flash_t, {true, true, false}, {1.0, 0.0, fit.gemm.overhead_s}, 1.0);
  if (!fa.ok()) return fa.status();
  fit.flash_forward = KernelTerms{(*fa)[0], (*fa)[1], (*fa)[2], BestFraction(flash_x, flash_t)};
  return fit;
}

}  // namespace testbed::calibrated
