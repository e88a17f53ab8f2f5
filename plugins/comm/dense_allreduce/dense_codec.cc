#include "dense_codec.h"

#include <cmath>
#include <cstring>

namespace testbed::dense {

std::int64_t CopyChecked(std::span<const float> gradient, std::span<float> values) noexcept {
  std::memcpy(values.data(), gradient.data(), gradient.size_bytes());
  // x * 0 is 0 for finite x and NaN otherwise: one vectorisable pass instead of a branch per
  // value; only when it trips are the bad values counted.
  float probe = 0.0f;
  for (float v : gradient) probe += v * 0.0f;
  if (probe == 0.0f) return 0;
  std::int64_t bad = 0;
  for (float v : gradient) bad += !std::isfinite(v);
  return bad;
}

void Divide(std::span<const float> summed, int divisor, std::span<float> out) noexcept {
  const auto d = static_cast<float>(divisor);
  for (std::size_t i = 0; i < summed.size(); ++i) out[i] = summed[i] / d;
}

}  // namespace testbed::dense
