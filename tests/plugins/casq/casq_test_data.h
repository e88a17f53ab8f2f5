// Gradients for the CASQ tests: heavy-tailed values (most small, a few large), optionally
// sparse, the shape CASQ's clustering is meant for.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace testbed::casq::testing {

inline std::vector<float> HeavyTailed(std::int64_t n, double density, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution keep(density), outlier(0.02);
  std::normal_distribution<float> small(0.0f, 1e-3f), large(0.0f, 5e-2f);
  std::vector<float> g(static_cast<std::size_t>(n), 0.0f);
  for (float& v : g) {
    if (!keep(rng)) continue;
    do {
      v = outlier(rng) ? large(rng) : small(rng);
    } while (v == 0.0f);
  }
  return g;
}

}  // namespace testbed::casq::testing
