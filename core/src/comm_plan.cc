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

void HostStagingLegs::Message(DeviceId a, DeviceId b, double bytes, int steps) {
  if (a == b || bytes <= 0 || cluster_.cross_vendor() != CrossVendorPath::kHostStaged || !cluster_.CrossesVendors(a, b)) {
    return;
  }
  // A node without host memory (no hub named as a host) has no staging route: the copy then
  // costs only the host copy.
  auto leg = [&](DeviceId d, bool to_device, std::vector<std::pair<LinkId, double>>& loads, double& latency) {
    absl::StatusOr<std::vector<LinkId>> route = cluster_.HostRoute(d, -1, to_device);
    double lat = 0;
    if (route.ok()) {
      for (LinkId l : *route) {
        lat += cluster_.links()[static_cast<size_t>(l)].spec.latency_s;
        loads.emplace_back(l, bytes);
      }
    }
    latency = std::max(latency, steps * lat);
  };
  leg(a, false, to_host_, to_host_latency_s_);
  leg(b, true, from_host_, from_host_latency_s_);
  const std::int64_t host = static_cast<std::int64_t>(cluster_.device(a).node) * 1024 + std::max(0, cluster_.NearestHost(a));
  host_bytes_.emplace_back(host, bytes);
}

void HostStagingLegs::Wrap(CommPhase network, std::vector<CommPhase>& phases) const {
  if (empty()) {
    phases.push_back(std::move(network));
    return;
  }
  auto summed = [](std::vector<std::pair<LinkId, double>> loads) {
    std::sort(loads.begin(), loads.end());
    std::vector<std::pair<LinkId, double>> out;
    for (const auto& [l, b] : loads) {
      if (!out.empty() && out.back().first == l) {
        out.back().second += b;
      } else {
        out.emplace_back(l, b);
      }
    }
    return out;
  };
  auto hosts = host_bytes_;
  std::sort(hosts.begin(), hosts.end());
  double copy_s = 0, run = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    run = (i > 0 && hosts[i].first == hosts[i - 1].first ? run : 0) + hosts[i].second;
    copy_s = std::max(copy_s, run / cluster_.host_copy_bytes_per_s());
  }
  CommPhase to_host;
  to_host.latency_s = to_host_latency_s_ + copy_s;
  to_host.link_bytes = summed(to_host_);
  CommPhase from_host;
  from_host.latency_s = from_host_latency_s_;
  from_host.link_bytes = summed(from_host_);
  phases.push_back(std::move(to_host));
  phases.push_back(std::move(network));
  phases.push_back(std::move(from_host));
}

}  // namespace testbed
