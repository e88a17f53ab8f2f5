// Fitting the calibrated device model: for each measured op class (attention and MLP block,
// forward and backward) the coefficients of its physical terms (kernel_features.h) are
// fitted to the measured times by non-negative least squares on the relative error.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernel_features.h"
#include "measurements.h"
#include "testbed/device_spec.h"
#include "testbed/layer_kernels.h"
#include "testbed/model_graph.h"

namespace testbed::calibrated {

enum class OpClass { kAttentionForward, kAttentionBackward, kMlpForward, kMlpBackward };
inline constexpr int kOpClassCount = 4;
inline constexpr std::array<OpClass, kOpClassCount> kOpClasses = {
    OpClass::kAttentionForward, OpClass::kAttentionBackward, OpClass::kMlpForward, OpClass::kMlpBackward};

// "attn_fp", "attn_bp", "mlp_fp", "mlp_bp": the CSV column stems.
[[nodiscard]] const char* OpClassName(OpClass op) noexcept;
[[nodiscard]] LayerKind LayerKindOf(OpClass op) noexcept;
[[nodiscard]] Phase PhaseOf(OpClass op) noexcept;
// The measured time of `op` in a row, milliseconds; negative when it did not run.
[[nodiscard]] double MeasuredMs(const Measurement& m, OpClass op) noexcept;

// What the measurements were taken on and with: the device's figures turn the fitted
// coefficients into efficiencies; the shape fills in what the CSV does not say.
struct CalibrationSetup {
  std::string device = "rtx3090";
  double peak_flops = 71.0e12;              // dense FP16 tensor peak, FP32 accumulate
  double bandwidth_bytes_per_s = 936.2e9;   // memory bandwidth
  std::int64_t seq_len = 1024;
  std::int64_t head_dim = 64;               // heads = hidden / head_dim
  Precision precision = Precision::kFp16;
  // Terms the fit may use (KernelFeatures::AsArray order); a term left out keeps its bound
  // (efficiency 1, or 0 for gemm_io and the overhead). For ablations in the tests.
  std::array<bool, KernelFeatures::kCount> fit_terms = {true, true, true, true, true};
};

struct Calibration {
  CalibrationSetup setup;
  std::array<OpCoefficients, kOpClassCount> ops;
  std::array<int, kOpClassCount> rows_fitted{};

  [[nodiscard]] const OpCoefficients& For(OpClass op) const { return ops[static_cast<std::size_t>(op)]; }
};

// The kernels of the op a row measured: one layer of a GPT transformer with the row's hidden
// size, heads = hidden / head_dim, the setup's sequence length, on tp devices.
// Errors: InvalidArgument when hidden is not a multiple of head_dim or tp does not divide
// the heads (naming the row's line).
[[nodiscard]] absl::StatusOr<std::vector<Kernel>> MeasuredKernels(const Measurement& m, OpClass op,
                                                                  const CalibrationSetup& setup);

// Fits each op class on the rows where it ran. Minimises sum ((predicted - measured) /
// measured)^2 so that a 1 ms op counts as much as a 30 ms one, with every efficiency <= 1 and
// every overhead >= 0. Errors: InvalidArgument for an impossible row, FailedPrecondition
// when an op class has fewer rows than coefficients.
[[nodiscard]] absl::StatusOr<Calibration> FitCalibration(const std::vector<Measurement>& rows,
                                                         const CalibrationSetup& setup);

// The fitted model's time for the op a row measured, on the calibration device, in ms.
[[nodiscard]] absl::StatusOr<double> PredictMeasuredMs(const Calibration& calibration, const Measurement& m,
                                                       OpClass op);

}  // namespace testbed::calibrated
