// The exact min-max partition of a chain by dynamic programming, for every prefix and part count
// at once: AutoPipe starts from it and re-balances prefixes with it while it searches.
#pragma once

#include <cstddef>
#include <vector>

namespace testbed::autopipe {

class PrefixMinMax {
 public:
  // O(n^2 k) time, O(n k) memory.
  PrefixMinMax(const std::vector<double>& weights, int max_parts);

  [[nodiscard]] double Best(int n, int k) const { return dp_[Index(n, k)]; }
  // Part sizes of an optimal split of the first n items into k parts. Of the optimal splits
  // it gives the last part as many items as it can (AutoPipe rebuilds front to back).
  [[nodiscard]] std::vector<int> Counts(int n, int k) const;
  [[nodiscard]] double Sum(int a, int b) const { return prefix_[static_cast<std::size_t>(b)] - prefix_[static_cast<std::size_t>(a)]; }
  [[nodiscard]] int items() const noexcept { return n_; }

 private:
  [[nodiscard]] std::size_t Index(int n, int k) const noexcept {
    return static_cast<std::size_t>(n) * static_cast<std::size_t>(k_ + 1) + static_cast<std::size_t>(k);
  }
  int n_ = 0, k_ = 0;
  std::vector<double> prefix_;
  std::vector<double> dp_;
};

}  // namespace testbed::autopipe
