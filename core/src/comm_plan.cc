#include <algorithm>

#include "testbed/collective.h"

namespace testbed {

double CommPlan::IsolatedTime(const Cluster& cluster) const {
  double total = 0;
  for (const CommPhase& p : phases) {
    double slowest = 0;
    for (const auto& [link, bytes] : p.link_bytes) {
      slowest = std::max(slowest, bytes / cluster.links()[static_cast<size_t>(link)].spec.bandwidth_bytes_per_s);
    }
    total += p.latency_s + slowest;
  }
  return total;
}

}  // namespace testbed
