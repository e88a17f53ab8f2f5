#include "roofline_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace testbed::roofline {

absl::StatusOr<double> RooflineModel::Time(const Kernel& k, const DeviceSpec& device) const {
  const Precision precision = k.precision;
  const double peak = device.PeakFlops(precision);
  if (peak <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("device '", device.name, "' has no ", PrecisionName(precision),
                                                    " peak in its preset"));
  }
  double compute = 0;
  if (k.flops > 0) {
    const double top = k.kind == KernelKind::kBatchedGemm ? p_.batched_gemm_efficiency : p_.gemm_efficiency;
    const double half = p_.gemm_half_gflops * 1e9;
    const double eff = k.kind == KernelKind::kMemory ? top : top * k.flops / (k.flops + half);
    compute = k.flops / (peak * eff);
  }
  const double memory = k.bytes / (device.memory_bandwidth_bytes_per_s * p_.memory_efficiency);
  return std::max(compute, memory) + p_.launch_overhead_s;
}

absl::StatusOr<double> RooflineModel::ComputeLayerTime(const LayerWork& work, const DeviceSpec& device) const {
  if (work.layer == nullptr || work.micro_batch < 1 || work.tp < 1) {
    return absl::InvalidArgumentError("layer work needs a layer, micro_batch >= 1 and tp >= 1");
  }
  const std::vector<Kernel> kernels = LayerKernels(work);
  // No tokens reached this rank's experts, or a part of a split backward with nothing to do
  // (an embedding's weight gradient is its gather's scatter, in the input-gradient part).
  if (kernels.empty() && (work.part == LayerPart::kMoeExperts || work.part == LayerPart::kBackwardData ||
                          work.part == LayerPart::kBackwardWeights)) {
    return 0.0;
  }
  if (kernels.empty()) {
    return absl::UnimplementedError(absl::StrCat("roofline: no kernels for a ", LayerKindName(work.layer->kind), " layer"));
  }
  double total = 0;
  for (const Kernel& k : kernels) {
    auto t = Time(k, device);
    if (!t.ok()) return t.status();
    total += *t;
  }
  return total;
}

absl::StatusOr<double> RooflineModel::KernelTime(double flops, double bytes, Precision precision,
                                                 const DeviceSpec& device) const {
  return Time(Kernel{"kernel", flops > 0 ? KernelKind::kGemm : KernelKind::kMemory, flops, bytes, precision}, device);
}

}  // namespace testbed::roofline
