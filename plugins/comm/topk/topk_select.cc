#include "topk_select.h"

#include <vector>

#include "magnitude_key.h"

namespace testbed::topk {
namespace {

// Walks a histogram from its top bin down and returns the bin holding the k-th largest,
// with the count strictly above it.
struct Bin {
  std::uint32_t bin;
  std::int64_t above;
};

Bin FindBin(const std::vector<std::int64_t>& histogram, std::int64_t k) {
  std::int64_t above = 0;
  for (std::size_t b = histogram.size(); b-- > 0;) {
    if (above + histogram[b] >= k) return {static_cast<std::uint32_t>(b), above};
    above += histogram[b];
  }
  return {0, above};  // unreachable for 1 <= k <= n
}

}  // namespace

// Radix select in two passes of 16 key bits each (the key's top bit is always zero, so the
// first pass has 2^15 bins). Both histograms fit in L2 and each pass reads the values once.
Threshold FindThreshold(std::span<const float> values, std::int64_t k) {
  std::vector<std::int64_t> high(1u << 15, 0);
  for (float v : values) ++high[MagnitudeKey(v) >> 16];
  return FindThresholdFromHigh(values, high, k);
}

Threshold FindThresholdFromHigh(std::span<const float> values, const std::vector<std::int64_t>& high, std::int64_t k) {
  const Bin h = FindBin(high, k);
  std::vector<std::int64_t> low(1u << 16, 0);
  for (float v : values) {
    const std::uint32_t key = MagnitudeKey(v);
    if ((key >> 16) == h.bin) ++low[key & 0xffffu];
  }
  const Bin l = FindBin(low, k - h.above);
  Threshold t;
  t.key = (h.bin << 16) | l.bin;
  t.greater = h.above + l.above;
  t.equal_needed = k - t.greater;
  return t;
}

std::int64_t SelectTopK(std::span<const float> gradient, std::span<float> residual, std::int64_t k,
                        std::span<std::uint32_t> indices, std::span<float> values) {
  const bool feedback = !residual.empty();
  const std::size_t n = gradient.size();
  // The error-feedback sum, the non-finite check and the first radix-select histogram share
  // one pass over the values. Non-finite keys fall in the top bins of the histogram.
  std::vector<std::int64_t> high(1u << 15, 0);
  if (feedback) {
    for (std::size_t i = 0; i < n; ++i) {
      residual[i] += gradient[i];
      ++high[MagnitudeKey(residual[i]) >> 16];
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) ++high[MagnitudeKey(gradient[i]) >> 16];
  }
  std::int64_t nonfinite = 0;
  for (std::uint32_t b = kNonFiniteKey >> 16; b < high.size(); ++b) nonfinite += high[b];
  if (nonfinite > 0) return nonfinite;
  std::span<const float> corrected = feedback ? std::span<const float>(residual) : gradient;
  const Threshold t = FindThresholdFromHigh(corrected, high, k);
  std::int64_t out = 0, equal_taken = 0;
  for (std::size_t i = 0; i < n && out < k; ++i) {
    const std::uint32_t key = MagnitudeKey(corrected[i]);
    const bool take = key > t.key || (key == t.key && equal_taken < t.equal_needed);
    if (!take) continue;
    equal_taken += key == t.key;
    indices[static_cast<std::size_t>(out)] = static_cast<std::uint32_t>(i);
    values[static_cast<std::size_t>(out)] = corrected[i];
    ++out;
    if (feedback) residual[i] = 0.0f;
  }
  return 0;
}

}  // namespace testbed::topk
