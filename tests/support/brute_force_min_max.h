// The reference for chain partitioners: the smallest possible largest part when the first `n`
// weights of `w` are cut into `parts` contiguous non-empty parts, by trying every cut.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

namespace testbed::testing {

inline double BruteForceMinMax(const std::vector<double>& w, int n, int parts) {
  double best = 1e300;
  std::function<void(int, int, double)> go = [&](int start, int left, double worst) {
    if (left == 1) {
      double sum = 0;
      for (int i = start; i < n; ++i) sum += w[static_cast<size_t>(i)];
      best = std::min(best, std::max(worst, sum));
      return;
    }
    double sum = 0;
    for (int end = start + 1; end <= n - (left - 1); ++end) {
      sum += w[static_cast<size_t>(end - 1)];
      go(end, left - 1, std::max(worst, sum));
    }
  };
  go(0, parts, 0);
  return best;
}

}  // namespace testbed::testing
