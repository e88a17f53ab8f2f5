// What one accelerator (or CPU) can do: peak FLOP/s per numeric precision, memory size and
// bandwidth. Loaded from configs/devices/*.toml; the figures there cite their source.
#pragma once

#include "absl/strings/string_view.h"
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace testbed {

enum class Precision { kFp32, kTf32, kFp16, kBf16, kFp8, kInt8, kInt4 };

[[nodiscard]] const char* PrecisionName(Precision p) noexcept;
[[nodiscard]] std::optional<Precision> PrecisionFromName(absl::string_view name) noexcept;
// Storage size of one element (TF32 is stored as FP32), rounded up to a whole byte.
[[nodiscard]] int BytesPerElement(Precision p) noexcept;
// Storage size of one element, exact (int4: 0.5).
[[nodiscard]] double ElementBytes(Precision p) noexcept;
// Bits per element of a precision (tf32: 32, as stored).
[[nodiscard]] int PrecisionBits(Precision p) noexcept;
// The precision a layer computes in at `bits` when the run trains in `base`: 32 is fp32, 16
// the run's 16-bit format (fp16 unless the run is bf16 or fp8), 5 to 8 int8 (fp8 in an fp8
// run), 2 to 4 int4; 0 (or any other width) is `base` itself.
[[nodiscard]] Precision PrecisionOfBits(int bits, Precision base) noexcept;
// The format a run training in `p` keeps and sends its weights, gradients and activations in.
// FP8 training is Transformer Engine's (Micikevicius et al. 2022, "FP8 Formats for Deep
// Learning"): the GEMMs of the transformer's linear layers take FP8 operands (E4M3 forward,
// E5M2 gradients) and write BF16; everything else, stored and sent, stays BF16. Every other
// precision is its own storage format.
[[nodiscard]] Precision StoragePrecision(Precision p) noexcept;

struct DeviceSpec {
  std::string name;    // preset name, e.g. "rtx3090"
  std::string vendor;  // "nvidia", "amd", "huawei", ...
  std::string doc;     // one line, with the source of the figures
  // Dense peak (no structured sparsity) for matrix work at each precision; for FP32 the
  // non-tensor-core figure. A precision the device lacks is absent.
  std::map<Precision, double> peak_flops;
  std::int64_t memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0.0;

  // Peak for `p`, or 0 when the device has no support for it.
  [[nodiscard]] double PeakFlops(Precision p) const noexcept {
    auto it = peak_flops.find(p);
    return it == peak_flops.end() ? 0.0 : it->second;
  }
};

}  // namespace testbed
