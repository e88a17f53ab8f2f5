#include "testbed/train/rng.h"

#include <cmath>
#include <numbers>

namespace testbed::train {

double Rng::Normal() noexcept {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = Uniform();
  while (u1 <= 0.0) u1 = Uniform();
  const double u2 = Uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(a);
  has_spare_ = true;
  return r * std::cos(a);
}

std::uint64_t Rng::Below(std::uint64_t n) noexcept {
  // Rejection sampling on the top of the range keeps every value equally likely.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  std::uint64_t v = engine_();
  while (v >= limit) v = engine_();
  return v % n;
}

std::vector<std::int64_t> Rng::Permutation(std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(Below(static_cast<std::uint64_t>(i + 1)));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

}  // namespace testbed::train
