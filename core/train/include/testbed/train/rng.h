// The training engine's random numbers: a 64-bit Mersenne Twister (its output sequence is
// fixed by the C++ standard) with our own uniform, normal and shuffle on top, because the
// standard distributions differ between library implementations. Same seed, same numbers,
// on every platform.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace testbed::train {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1).
  [[nodiscard]] double Uniform() noexcept { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller).
  [[nodiscard]] double Normal() noexcept;
  // Uniform integer in [0, n), n >= 1, without modulo bias.
  [[nodiscard]] std::uint64_t Below(std::uint64_t n) noexcept;
  // A Fisher-Yates permutation of 0..n-1.
  [[nodiscard]] std::vector<std::int64_t> Permutation(std::int64_t n);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace testbed::train
