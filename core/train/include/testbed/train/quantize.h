// Fake quantisation (quantise, then dequantise back to floating point) for low-precision
// training: the values a b-bit integer kernel would see, computed in T. A tensor is scaled
// per tensor by its largest magnitude, so nothing is clipped: signed tensors map onto the
// symmetric integers -(2^(b-1) - 1) .. 2^(b-1) - 1, tensors with no negative entry (the
// output of a GELU or ReLU) onto 0 .. 2^b - 1. Widths 2 to 8 are integer grids; 16 rounds to
// bfloat16 (8 exponent bits, 7 stored mantissa bits); 32 leaves the tensor as it is.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "testbed/train/rng.h"
#include "testbed/train/tensor.h"

namespace testbed::train {

enum class Rounding {
  kNearest,     // to the nearest grid point (ties away from zero): error at most half a step
  kStochastic,  // up with probability equal to the distance from the lower point: unbiased
};

// Whether `bits` is a width the quantiser implements (2..8, 16, 32).
[[nodiscard]] bool SupportedBits(int bits) noexcept;
// InvalidArgument naming `what` unless SupportedBits(bits).
[[nodiscard]] absl::Status CheckBits(int bits, const std::string& what);

// The grid step a b-bit (2..8) quantisation of `x` uses: max|x| / (2^(b-1) - 1) for a tensor
// with a negative entry, max(x) / (2^b - 1) otherwise; 0 for an all-zero tensor.
template <typename T>
[[nodiscard]] T QuantStep(const Matrix<T>& x, int bits) noexcept;

// x rounded to `bits` (SupportedBits). `rng` is used by stochastic rounding only (it must be
// non-null then). With bits = 32 the result is x, bit for bit.
template <typename T>
[[nodiscard]] Matrix<T> FakeQuantize(const Matrix<T>& x, int bits, Rounding rounding, Rng* rng);

// Bits a layer's matrix products use: its weights, its input activations and the gradient
// arriving at its output (rounded before the backward products, stochastically by default,
// as in 8-bit training). 32 everywhere: the full-precision layer, unchanged.
struct LayerQuant {
  int weight_bits = 32;
  int activation_bits = 32;
  int gradient_bits = 32;
  Rounding gradient_rounding = Rounding::kStochastic;
  std::uint64_t seed = 0;  // stochastic rounding's random numbers

  [[nodiscard]] bool full_precision() const noexcept {
    return weight_bits == 32 && activation_bits == 32 && gradient_bits == 32;
  }
};

}  // namespace testbed::train
