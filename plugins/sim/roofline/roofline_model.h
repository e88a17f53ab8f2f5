// Roofline device model: each kernel of a layer takes the larger of its compute time (at an
// efficiency that grows with the kernel's size and saturates at a fraction of peak) and its
// memory time (bytes over a fraction of the memory bandwidth), plus a launch overhead.
#pragma once

#include "testbed/device_model.h"
#include "testbed/layer_kernels.h"
#include "testbed/param_set.h"

namespace testbed::roofline {

struct RooflineParams {
  double gemm_efficiency = 0.7;          // of peak, for large GEMMs
  double batched_gemm_efficiency = 0.5;  // of peak, for large per-head attention products
  double gemm_half_gflops = 1.0;         // a GEMM this big runs at half its large-size efficiency
  double memory_efficiency = 0.8;        // of the memory bandwidth
  double launch_overhead_s = 5e-6;       // per kernel
};

class RooflineModel final : public DeviceModel {
 public:
  explicit RooflineModel(RooflineParams p) : p_(p) {}
  // Each part of a split backward from its own kernels (layer_kernels.h).
  [[nodiscard]] bool PricesBackwardParts() const noexcept override { return true; }
  [[nodiscard]] absl::StatusOr<double> ComputeLayerTime(const LayerWork& work, const DeviceSpec& device) const override;
  [[nodiscard]] absl::StatusOr<double> KernelTime(double flops, double bytes, Precision precision,
                                                  const DeviceSpec& device) const override;
  // Time of one kernel of the decomposition, on the units of its precision.
  [[nodiscard]] absl::StatusOr<double> Time(const Kernel& k, const DeviceSpec& device) const;

 private:
  RooflineParams p_;
};

}  // namespace testbed::roofline
