#include "dense_codec.h"

#include <cmath>
#include <cstring>

namespace testbed::dense {

std::int64_t CopyChecked(std::span<const float> gradient, std::span<float> values) noexcept {
  // One pass: copy, and flag values whose exponent bits are all ones (infinities and NaN).
  // Integer OR reductions vectorise; a float test would not without fast-math.
  const std::size_t n = gradient.size();
  const float* src = gradient.data();
  float* dst = values.data();
  std::uint32_t flagged = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, src + i, sizeof bits);
    flagged |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    dst[i] = src[i];
  }
  if (flagged == 0) return 0;
  std::int64_t bad = 0;
  for (float v : gradient) bad += !std::isfinite(v);
  return bad;
}

void Divide(std::span<const float> summed, int divisor, std::span<float> out) noexcept {
  const auto d = static_cast<float>(divisor);
  for (std::size_t i = 0; i < summed.size(); ++i) out[i] = summed[i] / d;
}

}  // namespace testbed::dense
