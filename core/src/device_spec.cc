#include "absl/strings/string_view.h"
#include "testbed/device_spec.h"

namespace testbed {

const char* PrecisionName(Precision p) noexcept {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp8: return "fp8";
    case Precision::kInt8: return "int8";
    case Precision::kInt4: return "int4";
  }
  return "?";
}

std::optional<Precision> PrecisionFromName(absl::string_view name) noexcept {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16,
                      Precision::kFp8, Precision::kInt8, Precision::kInt4}) {
    if (PrecisionName(p) == name) return p;
  }
  return std::nullopt;
}

int BytesPerElement(Precision p) noexcept {
  switch (p) {
    case Precision::kFp32:
    case Precision::kTf32: return 4;
    case Precision::kFp16:
    case Precision::kBf16: return 2;
    case Precision::kFp8:
    case Precision::kInt8:
    case Precision::kInt4: return 1;
  }
  return 4;
}

double ElementBytes(Precision p) noexcept { return p == Precision::kInt4 ? 0.5 : BytesPerElement(p); }

int PrecisionBits(Precision p) noexcept { return p == Precision::kInt4 ? 4 : 8 * BytesPerElement(p); }

Precision PrecisionOfBits(int bits, Precision base) noexcept {
  switch (bits) {
    case 32: return base == Precision::kTf32 ? Precision::kTf32 : Precision::kFp32;
    case 16: return base == Precision::kBf16 || base == Precision::kFp8 ? Precision::kBf16 : Precision::kFp16;
    default: break;
  }
  // Widths below 8 run on the narrowest units that hold them: 5 to 8 bits on 8-bit ones,
  // 2 to 4 on int4 (no device has 6-bit units).
  if (bits >= 5 && bits <= 8) return base == Precision::kFp8 ? Precision::kFp8 : Precision::kInt8;
  if (bits >= 2 && bits <= 4) return Precision::kInt4;
  return base;
}

Precision StoragePrecision(Precision p) noexcept { return p == Precision::kFp8 ? Precision::kBf16 : p; }

}  // namespace testbed
