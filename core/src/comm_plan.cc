#include <algorithm>

#include "absl/strings/str_cat.h"
#include "testbed/collective.h"
#include "testbed/status_macros.h"

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

absl::StatusOr<CommPlan> HostCopyPlan(DeviceId device, int host, bool to_device, std::int64_t bytes,
                                      const Cluster& cluster) {
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("copy of negative size ", bytes));
  TESTBED_ASSIGN_OR_RETURN(std::vector<LinkId> route, cluster.HostRoute(device, host, to_device));
  CommPlan plan;
  plan.algorithm = "copy";
  if (bytes == 0 || route.empty()) return plan;
  CommPhase phase;
  for (LinkId l : route) {
    phase.latency_s += cluster.links()[static_cast<size_t>(l)].spec.latency_s;
    phase.link_bytes.emplace_back(l, static_cast<double>(bytes));
  }
  plan.phases.push_back(std::move(phase));
  return plan;
}

}  // namespace testbed
