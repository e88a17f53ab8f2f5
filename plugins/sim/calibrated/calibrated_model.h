// The `calibrated` device model: a layer's time is the sum over its kernels
// (testbed::LayerKernels) of FLOPs / (peak x eta) and bytes / (bandwidth x eta) terms plus a
// per-kernel overhead, with the efficiencies fitted on measured per-layer op times
// (calibration.h). Efficiencies are relative to the peak and bandwidth of the device the
// model is asked about, so one calibration serves every device of a cluster.
#pragma once

#include <utility>
#include <vector>

#include "calibration.h"
#include "testbed/device_model.h"

namespace testbed::calibrated {

class CalibratedModel final : public DeviceModel {
 public:
  explicit CalibratedModel(Calibration calibration) : calibration_(std::move(calibration)) {}

  // Each part of a split backward from its own kernels (layer_kernels.h).
  [[nodiscard]] bool PricesBackwardParts() const noexcept override { return true; }
  // Attention layers use the attention coefficients; MLP, MoE, embedding and head layers
  // the MLP ones (the measured op closest in kernel mix: GEMMs and elementwise kernels, no
  // per-head products). Recompute is a forward. Errors: InvalidArgument for impossible work
  // (no layer, micro_batch or tp < 1, fraction outside (0, 1], tp not dividing the heads or
  // the FFN width, a device without a peak for the precision or without bandwidth),
  // Unimplemented for layer kinds without kernels (GNN).
  [[nodiscard]] absl::StatusOr<double> ComputeLayerTime(const LayerWork& work, const DeviceSpec& device) const override;

  // One kernel: the larger of its compute and memory terms at the MLP forward efficiencies,
  // plus the fitted per-kernel overhead.
  [[nodiscard]] absl::StatusOr<double> KernelTime(double flops, double bytes, Precision precision,
                                                  const DeviceSpec& device) const override;

  [[nodiscard]] const Calibration& calibration() const noexcept { return calibration_; }

 private:
  Calibration calibration_;
};

}  // namespace testbed::calibrated
