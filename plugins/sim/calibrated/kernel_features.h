// The physical terms of the calibrated device model. A layer's kernels (testbed::LayerKernels)
// are reduced to the times they would take at the device's full peak and full memory
// bandwidth; the model's time is a non-negative combination of those terms whose
// coefficients are inverse efficiencies, so a fit made on one device carries to another by
// its peak FLOP/s and bandwidth.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "testbed/layer_kernels.h"

namespace testbed::calibrated {

// Regressors of one op (a set of kernels), in seconds at 100% of peak or bandwidth, except
// `kernels` which is a count.
struct KernelFeatures {
  double gemm_s = 0;          // dense GEMM FLOPs / peak
  double batched_gemm_s = 0;  // per-head attention products (QK^T, scores x V) FLOPs / peak
  double memory_s = 0;        // bytes of memory-bound kernels / bandwidth
  // Operand and result bytes of all GEMMs / bandwidth. A GEMM with a thin dimension (few
  // tokens, a narrow tensor-parallel slice) moves many bytes per FLOP and runs below its
  // large-size efficiency; this term is how the model's GEMM efficiency depends on size.
  double gemm_io_s = 0;
  double kernels = 0;  // kernel count: host launch and framework cost per kernel

  static constexpr int kCount = 5;
  [[nodiscard]] std::array<double, kCount> AsArray() const {
    return {gemm_s, batched_gemm_s, memory_s, gemm_io_s, kernels};
  }
  KernelFeatures& operator+=(const KernelFeatures& o);
};

// Names of the terms in AsArray order, for tables and messages.
[[nodiscard]] const std::array<const char*, KernelFeatures::kCount>& FeatureNames();

// Sums the terms of `kernels`, each GEMM at `peak_flops(kernel.precision)` (FLOP/s), at
// `bandwidth` (bytes/s); both must be positive (the caller checks and names the device in its
// error).
[[nodiscard]] KernelFeatures FeaturesOf(const std::vector<Kernel>& kernels,
                                        absl::FunctionRef<double(Precision)> peak_flops, double bandwidth);

// Fitted coefficients of one op class. The first four are 1/efficiency (1 = the device's
// full peak or bandwidth; the fit never lets them fall below 1); the last is seconds.
struct OpCoefficients {
  double gemm = 1;          // 1 / eta_gemm
  double batched_gemm = 1;  // 1 / eta_batched_gemm
  double memory = 1;        // 1 / eta_memory
  double gemm_io = 0;       // 1 / eta_gemm_io (0: GEMM traffic fully hidden behind compute)
  double kernel_overhead_s = 0;

  [[nodiscard]] static OpCoefficients FromArray(const std::array<double, KernelFeatures::kCount>& c);
  [[nodiscard]] std::array<double, KernelFeatures::kCount> AsArray() const {
    return {gemm, batched_gemm, memory, gemm_io, kernel_overhead_s};
  }
  // Predicted time in seconds.
  [[nodiscard]] double Time(const KernelFeatures& f) const;
};

// Lower bounds the fit keeps: an efficiency can not exceed 1, an overhead can not be negative.
[[nodiscard]] const std::array<double, KernelFeatures::kCount>& CoefficientLowerBounds();

}  // namespace testbed::calibrated
