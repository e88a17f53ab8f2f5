#include "calibrated_model.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "work_checks.h"

namespace testbed::calibrated {
namespace {

// Kernels LayerKernels adds in front of a backward to recompute dropped activations
// (selective recomputation) are forward work and are costed as such.
bool IsRecomputeKernel(const Kernel& k) {
  constexpr std::string_view suffix = "_recompute";
  const std::string_view name = k.name == nullptr ? std::string_view() : std::string_view(k.name);
  return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

}  // namespace

absl::StatusOr<double> CalibratedModel::ComputeLayerTime(const LayerWork& work, const DeviceSpec& device) const {
  if (absl::Status st = CheckLayerWork(work, "calibrated"); !st.ok()) return st;
  const std::vector<Kernel> kernels = LayerKernels(work);
  // No tokens reached this rank's experts, or a part of a split backward with nothing to do.
  if (kernels.empty() && (work.part == LayerPart::kMoeExperts || work.part == LayerPart::kBackwardData ||
                          work.part == LayerPart::kBackwardWeights)) {
    return 0.0;
  }
  if (kernels.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("calibrated: no kernels for a ", LayerKindName(work.layer->kind), " layer"));
  }
  for (const Kernel& k : kernels) {
    if (absl::Status st = CheckDeviceFor(device, k.precision, k.flops > 0, "calibrated"); !st.ok()) return st;
  }

  const bool attention = work.layer->kind == LayerKind::kAttention;
  const OpClass fwd = attention ? OpClass::kAttentionForward : OpClass::kMlpForward;
  const OpClass bwd = attention ? OpClass::kAttentionBackward : OpClass::kMlpBackward;
  std::vector<Kernel> forward_part, backward_part;
  for (const Kernel& k : kernels) {
    (work.phase == Phase::kBackward && !IsRecomputeKernel(k) ? backward_part : forward_part).push_back(k);
  }
  const auto peak = [&](Precision p) { return device.PeakFlops(p); };
  const double bw = device.memory_bandwidth_bytes_per_s;
  double t = 0;
  if (!forward_part.empty()) t += calibration_.For(fwd).Time(FeaturesOf(forward_part, peak, bw));
  if (!backward_part.empty()) t += calibration_.For(bwd).Time(FeaturesOf(backward_part, peak, bw));
  if (!std::isfinite(t) || t < 0) {
    return absl::InternalError(absl::StrCat("calibrated: layer '", work.layer->name, "' costs ", t, " s"));
  }
  return t;
}

absl::StatusOr<double> CalibratedModel::KernelTime(double flops, double bytes, Precision precision,
                                                   const DeviceSpec& device) const {
  if (!std::isfinite(flops) || !std::isfinite(bytes) || flops < 0 || bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibrated: a kernel needs finite, non-negative FLOPs and bytes (got ", flops, ", ", bytes, ")"));
  }
  if (absl::Status st = CheckDeviceFor(device, precision, flops > 0, "calibrated"); !st.ok()) return st;
  const OpCoefficients& c = calibration_.For(OpClass::kMlpForward);
  const double compute = flops > 0 ? flops * c.gemm / device.PeakFlops(precision) : 0.0;
  const double memory = bytes * c.memory / device.memory_bandwidth_bytes_per_s;
  return std::max(compute, memory) + c.kernel_overhead_s;
}

}  // namespace testbed::calibrated
