// Random sparse gradients for the S2Reducer tests. Dyadic values (multiples of 2^-10 below 4
// in magnitude) keep every float sum in these tests exact, whatever the order of addition, so
// linearity can be checked bit for bit.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace testbed::s2reducer::testing {

struct GradientSpec {
  std::int64_t elements = 4096;
  double density = 0.05;
  bool positive = false;  // only positive values: sums of ranks never cancel
};

inline std::vector<float> DyadicGradient(const GradientSpec& spec, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution keep(spec.density);
  std::uniform_int_distribution<int> magnitude(1, 4095);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> g(static_cast<std::size_t>(spec.elements), 0.0f);
  for (float& v : g) {
    if (!keep(rng)) continue;
    v = static_cast<float>(magnitude(rng)) / 1024.0f;
    if (!spec.positive && negative(rng)) v = -v;
  }
  return g;
}

inline std::vector<float> GaussianGradient(std::int64_t elements, double density, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution keep(density);
  std::normal_distribution<float> value(0.0f, 1.0f);
  std::vector<float> g(static_cast<std::size_t>(elements), 0.0f);
  for (float& v : g) {
    if (keep(rng)) v = value(rng);
  }
  return g;
}

}  // namespace testbed::s2reducer::testing
