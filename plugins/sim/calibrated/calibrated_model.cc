#include "calibrated_model.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace testbed::calibrated {
namespace {

absl::Status CheckWork(const LayerWork& work) {
  if (work.layer == nullptr) return absl::InvalidArgumentError("calibrated: layer work without a layer");
  const Layer& l = *work.layer;
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("calibrated: layer '", l.name, "': ", what));
  };
  if (work.micro_batch < 1) return bad(absl::StrCat("micro_batch ", work.micro_batch, " must be >= 1"));
  if (work.tp < 1) return bad(absl::StrCat("tp ", work.tp, " must be >= 1"));
  if (!(work.fraction > 0 && work.fraction <= 1)) {
    return bad(absl::StrCat("fraction ", work.fraction, " of the micro-batch must be in (0, 1]"));
  }
  if (l.hidden < 1 || l.seq_len < 1) return bad("hidden and seq_len must be >= 1");
  // Megatron splits heads (attention) and the FFN width (MLP, experts) over the TP group.
  if ((l.kind == LayerKind::kAttention) && (l.heads < 1 || l.heads % work.tp != 0)) {
    return bad(absl::StrCat("tp ", work.tp, " does not divide the ", l.heads, " heads"));
  }
  if ((l.kind == LayerKind::kMlp || l.kind == LayerKind::kMoe) && (l.ffn_hidden < 1 || l.ffn_hidden % work.tp != 0)) {
    return bad(absl::StrCat("tp ", work.tp, " does not divide the FFN width ", l.ffn_hidden));
  }
  return absl::OkStatus();
}

absl::Status CheckDevice(const DeviceSpec& device, Precision precision, bool needs_peak) {
  if (needs_peak && !(device.PeakFlops(precision) > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibrated: device '", device.name, "' has no ", PrecisionName(precision), " peak in its preset"));
  }
  if (!(device.memory_bandwidth_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibrated: device '", device.name, "' has no memory bandwidth in its preset"));
  }
  return absl::OkStatus();
}

// Kernels LayerKernels adds in front of a backward to recompute dropped activations
// (selective recomputation) are forward work and are costed as such.
bool IsRecomputeKernel(const Kernel& k) {
  constexpr std::string_view suffix = "_recompute";
  const std::string_view name = k.name == nullptr ? std::string_view() : std::string_view(k.name);
  return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

}  // namespace

absl::StatusOr<double> CalibratedModel::ComputeLayerTime(const LayerWork& work, const DeviceSpec& device) const {
  if (absl::Status st = CheckWork(work); !st.ok()) return st;
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
    if (absl::Status st = CheckDevice(device, k.precision, k.flops > 0); !st.ok()) return st;
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
  if (absl::Status st = CheckDevice(device, precision, flops > 0); !st.ok()) return st;
  const OpCoefficients& c = calibration_.For(OpClass::kMlpForward);
  const double compute = flops > 0 ? flops * c.gemm / device.PeakFlops(precision) : 0.0;
  const double memory = bytes * c.memory / device.memory_bandwidth_bytes_per_s;
  return std::max(compute, memory) + c.kernel_overhead_s;
}

}  // namespace testbed::calibrated
