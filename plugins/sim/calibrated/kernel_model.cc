#include "kernel_model.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "work_checks.h"

namespace testbed::calibrated {
namespace {

constexpr const char* kName = "calibrated.kernels";

bool IsFlash(const Kernel& k) {
  const std::string_view name = k.name == nullptr ? std::string_view() : std::string_view(k.name);
  return name.substr(0, 15) == "flash_attention";
}

}  // namespace

absl::StatusOr<double> KernelCalibratedModel::Time(const Kernel& k, const DeviceSpec& device) const {
  if (absl::Status st = CheckDeviceFor(device, k.precision, k.flops > 0, kName); !st.ok()) return st;
  const double peak = device.PeakFlops(k.precision), bw = device.memory_bandwidth_bytes_per_s;
  switch (k.kind) {
    case KernelKind::kMemory:
      return k.bytes / (bw * options_.memory_efficiency) + fit_.gemm.overhead_s;
    case KernelKind::kBatchedGemm:
      if (IsFlash(k)) return fit_.flash_forward.Time(k.flops, peak, k.bytes, bw);
      [[fallthrough]];
    case KernelKind::kGemm: {
      KernelTerms terms = fit_.gemm;
      if (k.precision == Precision::kFp8) {
        terms.compute = fit_.gemm_fp8_compute;
        terms.ceiling = fit_.gemm_fp8_ceiling;
      }
      return terms.Time(k.flops, peak, k.bytes, bw);
    }
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
  const bool fp8 = precision == Precision::kFp8;
  const double efficiency = std::min(1 / (fp8 ? fit_.gemm_fp8_compute : fit_.gemm.compute),
                                     fp8 ? fit_.gemm_fp8_ceiling : fit_.gemm.ceiling);
  const double compute = flops > 0 ? flops / (device.PeakFlops(precision) * efficiency) : 0.0;
  return std::max(compute, bytes / (bw * options_.memory_efficiency)) + fit_.gemm.overhead_s;
}

}  // namespace testbed::calibrated
