#include "kernel_model.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "work_checks.h"

namespace testbed::calibrated {
namespace {

constexpr const char* kName = "calibrated.kernels";

std::string_view NameOf(const Kernel& k) { return k.name == nullptr ? std::string_view() : std::string_view(k.name); }

}  // namespace

absl::StatusOr<double> KernelCalibratedModel::Time(const Kernel& k, const DeviceSpec& device) const {
  if (absl::Status st = CheckDeviceFor(device, k.precision, k.flops > 0, kName); !st.ok()) return st;
  const double peak = device.PeakFlops(k.precision), bw = device.memory_bandwidth_bytes_per_s;
  switch (k.kind) {
    case KernelKind::kMemory:
      return k.bytes / (bw * MemoryEfficiency()) + fit_.gemm.overhead_s;
    case KernelKind::kBatchedGemm:
      if (NameOf(k) == "flash_attention") return fit_.flash_forward.Time(k.flops, k.special_ops, peak, k.bytes, bw);
      if (NameOf(k) == "flash_attention_backward") {
        return fit_.flash_backward.Time(k.flops, k.special_ops, peak, k.bytes, bw);
      }
      [[fallthrough]];
    case KernelKind::kGemm:
      return fit_.For(BenchKind::kGemm, k.precision).Time(k.flops, 0.0, peak, k.bytes, bw);
  }
  return absl::InternalError(absl::StrCat(kName, ": kernel '", k.name, "' of an unknown kind"));
}

absl::StatusOr<double> KernelCalibratedModel::ComputeLayerTime(const LayerWork& work, const DeviceSpec& device) const {
  if (absl::Status st = CheckLayerWork(work, kName); !st.ok()) return st;
  const std::vector<Kernel> kernels = LayerKernels(work);
  if (kernels.empty() && (work.part == LayerPart::kMoeExperts || work.part == LayerPart::kBackwardData ||
                          work.part == LayerPart::kBackwardWeights)) {
    return 0.0;
  }
  if (kernels.empty()) {
    return absl::UnimplementedError(absl::StrCat(kName, ": no kernels for a ", LayerKindName(work.layer->kind), " layer"));
  }
  double total = 0;
  for (const Kernel& k : kernels) {
    auto t = Time(k, device);
    if (!t.ok()) return t.status();
    total += *t;
  }
  if (!std::isfinite(total) || total < 0) {
    return absl::InternalError(absl::StrCat(kName, ": layer '", work.layer->name, "' costs ", total, " s"));
  }
  return total;
}

absl::StatusOr<double> KernelCalibratedModel::KernelTime(double flops, double bytes, Precision precision,
                                                         const DeviceSpec& device) const {
  if (!std::isfinite(flops) || !std::isfinite(bytes) || flops < 0 || bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(kName, ": a kernel needs finite, non-negative FLOPs and bytes (got ",
                                                   flops, ", ", bytes, ")"));
  }
  if (absl::Status st = CheckDeviceFor(device, precision, flops > 0, kName); !st.ok()) return st;
  const double bw = device.memory_bandwidth_bytes_per_s;
  const KernelTerms& gemm = fit_.For(BenchKind::kGemm, precision);
  const double efficiency = std::min(1 / gemm.compute, gemm.ceiling);
  const double compute = flops > 0 ? flops / (device.PeakFlops(precision) * efficiency) : 0.0;
  return std::max(compute, bytes / (bw * MemoryEfficiency())) + fit_.gemm.overhead_s;
}

}  // namespace testbed::calibrated
