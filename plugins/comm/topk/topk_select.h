// Top-k selection with error feedback on the CPU: the k values of largest magnitude, ties at
// the threshold broken by lowest index, returned in index order. The rule is exact, so the
// CUDA twin (topk_cuda.h) selects the same set.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace testbed::topk {

// The k-th largest magnitude key and how the k selected values split around it.
struct Threshold {
  std::uint32_t key = 0;          // MagnitudeKey of the k-th largest magnitude
  std::int64_t greater = 0;       // values with a larger key (all selected)
  std::int64_t equal_needed = 0;  // values with this key to select, lowest indices first
};

// Requires 1 <= k <= values.size() and finite values.
[[nodiscard]] Threshold FindThreshold(std::span<const float> values, std::int64_t k);

// The second half of FindThreshold, for callers that built the histogram of the top 16 key
// bits (2^15 bins) themselves while making `values`.
[[nodiscard]] Threshold FindThresholdFromHigh(std::span<const float> values, const std::vector<std::int64_t>& high,
                                              std::int64_t k);

// Selects k values into `indices` and `values` (k each, index order).
// With error feedback (`residual` non-empty, same length as `gradient`): the corrected
// gradient residual + gradient is what gets selected, and afterwards `residual` holds the
// corrected values that were not sent (the selected positions are zeroed). Without it the
// gradient is selected from directly. Returns the number of non-finite values seen in the
// corrected gradient; when it is not zero nothing is selected and `residual` holds the
// corrected gradient.
[[nodiscard]] std::int64_t SelectTopK(std::span<const float> gradient, std::span<float> residual, std::int64_t k,
                                      std::span<std::uint32_t> indices, std::span<float> values);

}  // namespace testbed::topk
