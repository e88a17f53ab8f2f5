// The uncompressed path on the CPU: the payload is the gradient itself, the merged payload is
// the sum. Plain functions shared by the component, its tests and the benchmark.
#pragma once

#include <cstdint>
#include <span>

namespace testbed::dense {

// Copies `gradient` into `values` and returns how many values were not finite.
[[nodiscard]] std::int64_t CopyChecked(std::span<const float> gradient, std::span<float> values) noexcept;

// out[i] = summed[i] / divisor.
void Divide(std::span<const float> summed, int divisor, std::span<float> out) noexcept;

}  // namespace testbed::dense
