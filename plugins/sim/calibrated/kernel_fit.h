// Fitting the `calibrated.kernels` device model on published kernel benchmarks
// (kernel_bench.h). Each kernel class costs
//
//     t = max( c_compute * FLOPs / peak + c_special * exps / peak + c_traffic * bytes / bandwidth
//              + overhead,  FLOPs / (peak * ceiling) )
//
// with c = 1 / efficiency relative to the device's peak FLOP/s (at the kernel's precision)
// and memory bandwidth, so that a fit made on one device carries to another of the same
// architecture by its peak and bandwidth (an H200 is an H100 with faster memory). The traffic
// term is how a GEMM's efficiency falls when a dimension is thin; in FlashAttention it is the
// per-row work (loading Q, writing O, rescaling) that long sequences amortise. The special
// term is FlashAttention's exponentials (one per score, whatever the head size), which make a
// head of 64 slower per FLOP than one of 128. Fitted by non-negative least squares on the
// relative error, efficiencies at most 1. The ceiling is the largest fraction of the peak the
// class's measurements reach: without it a GEMM larger than any measured would approach the
// fitted compute efficiency (0.93 for the H100's BF16 GEMMs) while the largest ones measured
// stop near 0.8 (sustained GEMMs lower the clock; the sweeps of the largest shapes find no
// faster one).
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
  double compute = 1;     // 1 / efficiency on the peak FLOP/s (>= 1)
  double special = 0;     // seconds per exponential, in units of 1 / peak (>= 0)
  double traffic = 0;     // 1 / efficiency on the memory bandwidth for the bytes moved (>= 0)
  double overhead_s = 0;  // fixed seconds per kernel (>= 0)
  double ceiling = 1;     // largest fraction of the peak a kernel of the class reaches

  [[nodiscard]] double Time(double flops, double special_ops, double peak, double bytes,
                            double bandwidth) const noexcept {
    const double sum = (flops > 0 ? compute * flops / peak : 0.0) + special * special_ops / peak +
                       traffic * bytes / bandwidth + overhead_s;
    return flops > 0 ? std::max(sum, flops / (peak * ceiling)) : sum;
  }
};

// The device the benchmarks ran on, and which rows the fit uses.
struct KernelFitSetup {
  std::string device = "h100-sxm";
  double peak_bf16_flops = 989.4e12;  // dense BF16/FP16 tensor peak
  double peak_fp8_flops = 1978.9e12;  // dense FP8 tensor peak
  double bandwidth_bytes_per_s = 3350e9;
  std::string flash_impl = "fa3";     // FlashAttention rows fitted (impl column)
  bool fit_special = true;            // fit the exponentials' term where head sizes differ (ablation: false)
  // Memory-bound rows fitted (impl column): tuned kernels, as training frameworks' fused
  // normalisations are; others (torch.compile's) check the fit.
  std::vector<std::string> memory_impls = {"quack", "cudnn"};
  // Rows for which this returns false are left out of the fit (the hold-out tests).
  std::function<bool(const KernelBenchRow&)> use = nullptr;

  [[nodiscard]] double Peak(Precision p) const noexcept { return p == Precision::kFp8 ? peak_fp8_flops : peak_bf16_flops; }
};

struct KernelFit {
  KernelFitSetup setup;
  KernelTerms gemm;              // BF16/FP16 GEMMs: compute, traffic and overhead fitted
  KernelTerms gemm_fp8;          // FP8 GEMMs: compute fitted; traffic and overhead as gemm
  KernelTerms flash_forward;     // FlashAttention forward: compute, special (when the rows have
  KernelTerms flash_backward;    // several head sizes) and traffic fitted; backward likewise
  KernelTerms memory;            // memory-bound kernels: traffic fitted (1 / the bandwidth's share)
  int gemm_rows = 0, gemm_fp8_rows = 0, flash_forward_rows = 0, flash_backward_rows = 0, memory_rows = 0;
  // The share of the memory bandwidth memory-bound kernels reach: fitted where the data has
  // memory rows, else `otherwise`.
  [[nodiscard]] double MemoryEfficiency(double otherwise) const noexcept {
    return memory_rows > 0 && memory.traffic > 0 ? 1.0 / memory.traffic : otherwise;
  }

  // The fitted time of a benchmark row on the setup's device, seconds.
  [[nodiscard]] double Predict(const KernelBenchRow& row) const noexcept;
  [[nodiscard]] const KernelTerms& For(BenchKind kind, Precision precision) const noexcept;
};

// Fits each class on its rows: BF16/FP16 GEMMs; FP8 GEMMs (compute only, with the BF16 fit's
// traffic and overhead); the setup's flash_impl forward and backward rows without a causal
// mask (with the GEMM overhead; the special term only where the rows span several head
// sizes, else 0); memory-bound rows of the setup's memory_impls (traffic only, none needed).
// Causal rows are left out: they check how the fit carries to causal kernels.
// Errors: InvalidArgument for a setup without positive peaks and bandwidth,
// FailedPrecondition when a class has fewer rows than coefficients to fit.
[[nodiscard]] absl::StatusOr<KernelFit> FitKernels(const std::vector<KernelBenchRow>& rows, const KernelFitSetup& setup);

}  // namespace testbed::calibrated
