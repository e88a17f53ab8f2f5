// Fitting the `calibrated.kernels` device model on published kernel benchmarks
// (kernel_bench.h). Each kernel class costs
//
//     t = c_compute * FLOPs / peak(precision) + c_traffic * bytes / bandwidth + overhead
//
// with c = 1 / efficiency relative to the device's peak and memory bandwidth, so that a fit
// made on one device carries to another of the same architecture by its peak and bandwidth
// (an H200 is an H100 with faster memory). The traffic term is how a GEMM's efficiency falls
// when a dimension is thin; in FlashAttention it is the per-row work (loading Q, writing O,
// the softmax rescaling) that long sequences amortise. Fitted by non-negative least squares
// on the relative error, efficiencies kept at or below 1. Each class then has a ceiling: no
// kernel runs faster than the fastest of its class measured (as a fraction of the peak).
// Without it a GEMM larger than any measured would approach the fitted compute efficiency
// (0.93 for the H100's BF16 GEMMs) although the largest ones measured stop near 0.8
// (sustained GEMMs lower the clock; the sweeps of the largest shapes find no faster one).
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernel_bench.h"

namespace testbed::calibrated {

// Coefficients of one kernel class.
struct KernelTerms {
  double compute = 1;    // 1 / efficiency on the peak FLOP/s (>= 1)
  double traffic = 0;    // 1 / efficiency on the memory bandwidth for the bytes moved (>= 0)
  double overhead_s = 0; // fixed seconds per kernel (>= 0)
  double ceiling = 1;    // largest fraction of the peak a kernel of the class reaches

  [[nodiscard]] double Time(double flops, double peak, double bytes, double bandwidth) const noexcept {
    if (!(flops > 0)) return traffic * bytes / bandwidth + overhead_s;
    return std::max(compute * flops / peak + traffic * bytes / bandwidth + overhead_s, flops / (peak * ceiling));
  }
};

// The device the benchmarks ran on, and which rows the fit uses.
struct KernelFitSetup {
  std::string device = "h100-sxm";
  double peak_bf16_flops = 989.4e12;  // dense BF16/FP16 tensor peak
  double peak_fp8_flops = 1978.9e12;  // dense FP8 tensor peak
  double bandwidth_bytes_per_s = 3350e9;
  std::string flash_impl = "fa3";     // FlashAttention rows fitted (impl column)
  // Rows for which this returns false are left out of the fit (the hold-out tests).
  std::function<bool(const KernelBenchRow&)> use = nullptr;

  [[nodiscard]] double Peak(Precision p) const noexcept { return p == Precision::kFp8 ? peak_fp8_flops : peak_bf16_flops; }
};

struct KernelFit {
  KernelFitSetup setup;
  KernelTerms gemm;              // BF16/FP16 GEMMs: all three terms fitted
  double gemm_fp8_compute = 1;   // FP8 GEMMs: 1 / efficiency on the FP8 peak (traffic, overhead as gemm)
  double gemm_fp8_ceiling = 1;   // and their ceiling
  KernelTerms flash_forward;     // FlashAttention forward: compute and traffic fitted, overhead as gemm
  int gemm_rows = 0, gemm_fp8_rows = 0, flash_rows = 0;

  // The fitted time of a benchmark row on the setup's device, seconds.
  [[nodiscard]] double Predict(const KernelBenchRow& row) const noexcept;
};

// Fits the GEMM terms on the BF16/FP16 GEMM rows, the FP8 compute coefficient on the FP8 GEMM
// rows (with the BF16 fit's traffic and overhead), and the FlashAttention forward terms on the
// setup's flash_impl rows (with the GEMM overhead). Errors: InvalidArgument for a setup
// without positive peaks and bandwidth, FailedPrecondition when a class has fewer rows than
// it fits coefficients (3 BF16 GEMMs, 1 FP8 GEMM, 2 FlashAttention rows).
[[nodiscard]] absl::StatusOr<KernelFit> FitKernels(const std::vector<KernelBenchRow>& rows, const KernelFitSetup& setup);

}  // namespace testbed::calibrated
