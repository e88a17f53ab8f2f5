#include "min_max_dp.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace testbed::autopipe {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
bool Same(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max({1.0, std::abs(a), std::abs(b)}); }
}  // namespace

PrefixMinMax::PrefixMinMax(const std::vector<double>& weights, int max_parts)
    : n_(static_cast<int>(weights.size())), k_(std::max(1, max_parts)) {
  prefix_.assign(weights.size() + 1, 0.0);
  for (size_t i = 0; i < weights.size(); ++i) prefix_[i + 1] = prefix_[i] + weights[i];
  dp_.assign(static_cast<size_t>(n_ + 1) * static_cast<size_t>(k_ + 1), kInf);
  dp_[Index(0, 0)] = 0;
  for (int n = 1; n <= n_; ++n) {
    for (int k = 1; k <= std::min(n, k_); ++k) {
      double best = kInf;
      // The last part is items [j, n); the first j items form k - 1 parts (j >= k - 1).
      for (int j = k - 1; j < n; ++j) {
        const double prev = dp_[Index(j, k - 1)];
        if (prev == kInf) continue;
        best = std::min(best, std::max(prev, Sum(j, n)));
      }
      dp_[Index(n, k)] = best;
    }
  }
}

std::vector<int> PrefixMinMax::Counts(int n, int k) const {
  std::vector<int> counts(static_cast<size_t>(k), 0);
  while (k > 0) {
    const double target = Best(n, k);
    int j = k - 1;
    // Smallest j (largest last part) that still achieves the optimum.
    for (; j < n; ++j) {
      const double prev = dp_[Index(j, k - 1)];
      if (prev == kInf) continue;
      if (Same(std::max(prev, Sum(j, n)), target)) break;
    }
    counts[static_cast<size_t>(k - 1)] = n - j;
    n = j;
    --k;
  }
  return counts;
}

}  // namespace testbed::autopipe
