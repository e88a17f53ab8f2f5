#include "kernel_features.h"

namespace testbed::calibrated {

KernelFeatures& KernelFeatures::operator+=(const KernelFeatures& o) {
  gemm_s += o.gemm_s;
  batched_gemm_s += o.batched_gemm_s;
  memory_s += o.memory_s;
  gemm_io_s += o.gemm_io_s;
  kernels += o.kernels;
  return *this;
}

const std::array<const char*, KernelFeatures::kCount>& FeatureNames() {
  static const std::array<const char*, KernelFeatures::kCount> names = {"gemm", "batched_gemm", "memory", "gemm_io",
                                                                         "kernel_overhead"};
  return names;
}

KernelFeatures FeaturesOf(const std::vector<Kernel>& kernels, absl::FunctionRef<double(Precision)> peak_flops,
                          double bandwidth) {
  KernelFeatures f;
  for (const Kernel& k : kernels) {
    switch (k.kind) {
      case KernelKind::kGemm:
        f.gemm_s += k.flops / peak_flops(k.precision);
        f.gemm_io_s += k.bytes / bandwidth;
        break;
      case KernelKind::kBatchedGemm:
        f.batched_gemm_s += k.flops / peak_flops(k.precision);
        f.gemm_io_s += k.bytes / bandwidth;
        break;
      case KernelKind::kMemory:
        // A memory-bound kernel's arithmetic (if any) hides behind its traffic.
        f.memory_s += k.bytes / bandwidth;
        break;
    }
    f.kernels += 1;
  }
  return f;
}

OpCoefficients OpCoefficients::FromArray(const std::array<double, KernelFeatures::kCount>& c) {
  return OpCoefficients{c[0], c[1], c[2], c[3], c[4]};
}

double OpCoefficients::Time(const KernelFeatures& f) const {
  const auto x = f.AsArray();
  const auto c = AsArray();
  double t = 0;
  for (int i = 0; i < KernelFeatures::kCount; ++i) t += c[static_cast<std::size_t>(i)] * x[static_cast<std::size_t>(i)];
  return t;
}

const std::array<double, KernelFeatures::kCount>& CoefficientLowerBounds() {
  static const std::array<double, KernelFeatures::kCount> lower = {1.0, 1.0, 1.0, 0.0, 0.0};
  return lower;
}

}  // namespace testbed::calibrated
