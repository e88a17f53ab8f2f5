#include "static_cache.h"

#include <algorithm>
#include <numeric>

namespace testbed::pagraph {

std::vector<std::int64_t> CachedVertices(std::span<const std::int64_t> degrees, std::int64_t rows) {
  const auto n = static_cast<std::int64_t>(degrees.size());
  std::vector<std::int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const std::int64_t keep = std::clamp<std::int64_t>(rows, 0, n);
  auto hotter = [&](std::int64_t a, std::int64_t b) {
    const std::int64_t da = degrees[static_cast<size_t>(a)], db = degrees[static_cast<size_t>(b)];
    return da != db ? da > db : a < b;
  };
  std::nth_element(order.begin(), order.begin() + keep, order.end(), hotter);
  order.resize(static_cast<size_t>(keep));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace testbed::pagraph
