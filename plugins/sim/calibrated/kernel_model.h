// The `calibrated.kernels` device model: each kernel of a layer (testbed::LayerKernels) is
// costed by the class its kind and name put it in, with coefficients fitted on published
// kernel benchmarks of the device (kernel_fit.h):
//   - GEMMs (and the unfused per-head attention products): the GEMM fit, FP8 GEMMs with
//     their own compute efficiency on the FP8 peak;
//   - FlashAttention forward and backward: their own fits (GEMM FLOPs, exponentials, bytes);
//   - memory-bound kernels: bytes / (bandwidth x efficiency), the efficiency fitted on the
//     data's memory rows (or given: memory_efficiency);
// plus the GEMM fit's fixed time per kernel. Efficiencies are relative to the peak and
// bandwidth of the device asked about, so the H100 fit prices an H200 by its faster memory.
#pragma once

#include <utility>

#include "kernel_fit.h"
#include "testbed/device_model.h"
#include "testbed/layer_kernels.h"

namespace testbed::calibrated {

struct KernelModelOptions {
  // Share of the memory bandwidth memory-bound kernels reach; 0: fitted on the data's memory
  // rows, or kUnfittedMemoryEfficiency where it has none.
  double memory_efficiency = 0;
};
inline constexpr double kUnfittedMemoryEfficiency = 0.8;

class KernelCalibratedModel final : public DeviceModel {
 public:
  KernelCalibratedModel(KernelFit fit, KernelModelOptions options) : fit_(std::move(fit)), options_(options) {}

  [[nodiscard]] bool PricesBackwardParts() const noexcept override { return true; }
  // Errors: InvalidArgument for impossible work or a device without the peak or bandwidth a
  // kernel needs; Unimplemented for layer kinds without kernels.
  [[nodiscard]] absl::StatusOr<double> ComputeLayerTime(const LayerWork& work, const DeviceSpec& device) const override;
  // A generic kernel: the larger of its GEMM compute time and its memory time, plus the
  // per-kernel time.
  [[nodiscard]] absl::StatusOr<double> KernelTime(double flops, double bytes, Precision precision,
                                                  const DeviceSpec& device) const override;
  // One kernel of a layer's decomposition. Errors as ComputeLayerTime.
  [[nodiscard]] absl::StatusOr<double> Time(const Kernel& k, const DeviceSpec& device) const;

  [[nodiscard]] const KernelFit& fit() const noexcept { return fit_; }
  // The share of the bandwidth memory-bound kernels reach (options, else the fit).
  [[nodiscard]] double MemoryEfficiency() const noexcept {
    return options_.memory_efficiency > 0 ? options_.memory_efficiency : fit_.MemoryEfficiency(kUnfittedMemoryEfficiency);
  }

 private:
  KernelFit fit_;
  KernelModelOptions options_;
};

}  // namespace testbed::calibrated
