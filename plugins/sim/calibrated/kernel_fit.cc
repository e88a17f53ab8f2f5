#include "kernel_fit.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <set>

#include "absl/strings/str_cat.h"
#include "nnls.h"

namespace testbed::calibrated {
namespace {

constexpr std::size_t kTerms = 4;  // compute, special, traffic, overhead
using Features = std::array<double, kTerms>;

// The rows of one class: their features on the setup's device and measured seconds.
struct ClassRows {
  std::vector<Features> x;
  std::vector<double> t;
  std::set<std::int64_t> head_sizes;

  void Add(const KernelFitSetup& setup, const KernelBenchRow& r) {
    const double peak = setup.Peak(r.precision);
    x.push_back({r.Flops() / peak, r.SpecialOps() / peak, r.Bytes() / setup.bandwidth_bytes_per_s, 1.0});
    t.push_back(r.MeasuredSeconds());
    if (r.kind == BenchKind::kFlashForward || r.kind == BenchKind::kFlashBackward) head_sizes.insert(r.k);
  }
  // The largest fraction of the peak a row reaches.
  [[nodiscard]] double BestFraction() const {
    double best = 0;
    for (std::size_t i = 0; i < t.size(); ++i) best = std::max(best, x[i][0] / t[i]);
    return std::min(best, 1.0);
  }
};

// min sum ((sum_j c_j f_ij) / t_i - 1)^2 over the terms in `fit` (others fixed at `fixed`),
// c_compute >= 1 (an efficiency of at most 1), the rest >= 0. Columns are scaled to unit norm.
absl::StatusOr<KernelTerms> FitRelative(const ClassRows& rows, const std::array<bool, kTerms>& fit,
                                        const Features& fixed) {
  const auto n = static_cast<Eigen::Index>(rows.t.size());
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, static_cast<Eigen::Index>(kTerms));
  Eigen::VectorXd b(n);
  const Features lower = {1.0, 0.0, 0.0, 0.0};
  for (Eigen::Index i = 0; i < n; ++i) {
    double rest = 1.0;
    for (std::size_t j = 0; j < kTerms; ++j) {
      const double v = rows.x[static_cast<std::size_t>(i)][j] / rows.t[static_cast<std::size_t>(i)];
      if (fit[j]) {
        a(i, static_cast<Eigen::Index>(j)) = v;
        rest -= lower[j] * v;
      } else {
        rest -= fixed[j] * v;
      }
    }
    b[i] = rest;
  }
  Features scale{};
  for (std::size_t j = 0; j < kTerms; ++j) {
    const double norm = a.col(static_cast<Eigen::Index>(j)).norm();
    scale[j] = norm > 0 ? norm : 1.0;
    a.col(static_cast<Eigen::Index>(j)) /= scale[j];
  }
  auto d = SolveNnls(a, b);
  if (!d.ok()) return d.status();
  Features c{};
  for (std::size_t j = 0; j < kTerms; ++j) {
    c[j] = fit[j] ? lower[j] + (*d)[static_cast<Eigen::Index>(j)] / scale[j] : fixed[j];
  }
  return KernelTerms{c[0], c[1], c[2], c[3], rows.BestFraction()};
}

absl::Status TooFew(const std::string& what, std::size_t have, int need) {
  return absl::FailedPreconditionError(
      absl::StrCat("calibrated.kernels: ", have, " ", what, " rows, at least ", need, " are needed to fit them"));
}

// A FlashAttention class: compute and traffic, and the special term where head sizes differ.
absl::StatusOr<KernelTerms> FitFlash(const ClassRows& rows, const std::string& what, double overhead_s,
                                     bool fit_special) {
  const bool special = fit_special && rows.head_sizes.size() > 1;
  const int need = special ? 3 : 2;
  if (static_cast<int>(rows.t.size()) < need) return TooFew(what, rows.t.size(), need);
  return FitRelative(rows, {true, special, true, false}, {1.0, 0.0, 0.0, overhead_s});
}

}  // namespace

const KernelTerms& KernelFit::For(BenchKind kind, Precision precision) const noexcept {
  switch (kind) {
    case BenchKind::kFlashForward: return flash_forward;
    case BenchKind::kFlashBackward: return flash_backward;
    case BenchKind::kMemory: return memory;
    case BenchKind::kGemm: break;
  }
  return precision == Precision::kFp8 ? gemm_fp8 : gemm;
}

double KernelFit::Predict(const KernelBenchRow& row) const noexcept {
  return For(row.kind, row.precision)
      .Time(row.Flops(), row.SpecialOps(), setup.Peak(row.precision), row.Bytes(), setup.bandwidth_bytes_per_s);
}

absl::StatusOr<KernelFit> FitKernels(const std::vector<KernelBenchRow>& rows, const KernelFitSetup& setup) {
  if (!(setup.peak_bf16_flops > 0) || !(setup.peak_fp8_flops > 0) || !(setup.bandwidth_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(
        "calibrated.kernels: the measured device's peaks (BF16, FP8) and memory bandwidth must be positive");
  }
  KernelFit fit;
  fit.setup = setup;
  ClassRows gemm, fp8, forward, backward, memory;
  for (const KernelBenchRow& r : rows) {
    if (setup.use && !setup.use(r)) continue;
    if (r.kind == BenchKind::kMemory) {
      if (std::find(setup.memory_impls.begin(), setup.memory_impls.end(), r.impl) != setup.memory_impls.end()) {
        memory.Add(setup, r);
      }
    } else if (r.kind == BenchKind::kGemm) {
      (r.precision == Precision::kFp8 ? fp8 : gemm).Add(setup, r);
    } else if (r.impl == setup.flash_impl && !r.causal) {  // causal rows check the fit, they are not in it
      (r.kind == BenchKind::kFlashForward ? forward : backward).Add(setup, r);
    }
  }
  fit.gemm_rows = static_cast<int>(gemm.t.size());
  fit.gemm_fp8_rows = static_cast<int>(fp8.t.size());
  fit.flash_forward_rows = static_cast<int>(forward.t.size());
  fit.flash_backward_rows = static_cast<int>(backward.t.size());
  fit.memory_rows = static_cast<int>(memory.t.size());
  if (gemm.t.size() < 3) return TooFew("BF16/FP16 GEMM", gemm.t.size(), 3);
  if (fp8.t.empty()) return TooFew("FP8 GEMM", 0, 1);

  auto g = FitRelative(gemm, {true, false, true, true}, {});
  if (!g.ok()) return g.status();
  fit.gemm = *g;
  auto f8 = FitRelative(fp8, {true, false, false, false}, {1.0, 0.0, fit.gemm.traffic, fit.gemm.overhead_s});
  if (!f8.ok()) return f8.status();
  fit.gemm_fp8 = *f8;
  auto fwd = FitFlash(forward, absl::StrCat("FlashAttention forward (", setup.flash_impl, ")"), fit.gemm.overhead_s,
                      setup.fit_special);
  if (!fwd.ok()) return fwd.status();
  fit.flash_forward = *fwd;
  auto bwd = FitFlash(backward, absl::StrCat("FlashAttention backward (", setup.flash_impl, ")"), fit.gemm.overhead_s,
                      setup.fit_special);
  if (!bwd.ok()) return bwd.status();
  fit.flash_backward = *bwd;
  if (!memory.t.empty()) {
    // The traffic term alone, at least 1 (no more than the bandwidth); the kernels are large
    // enough (hundreds of microseconds) that a fixed cost does not show.
    auto mem = FitRelative(memory, {false, false, true, false}, {0.0, 0.0, 1.0, 0.0});
    if (!mem.ok()) return mem.status();
    fit.memory = *mem;  // compute stays at its fixed 0
    fit.memory.traffic = std::max(fit.memory.traffic, 1.0);
    fit.memory.ceiling = 1;  // no FLOPs: BestFraction's 0 would mean nothing
  }
  return fit;
}

}  // namespace testbed::calibrated
