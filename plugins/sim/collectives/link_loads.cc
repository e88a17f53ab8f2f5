#include "link_loads.h"

#include <algorithm>

namespace testbed::collectives {

std::vector<std::pair<LinkId, double>> LinkLoads::Sorted() const {
  // By link, each link's additions in the order they came, summed from zero in that order.
  std::vector<std::pair<LinkId, double>> by_link = added_;
  std::stable_sort(by_link.begin(), by_link.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::pair<LinkId, double>> out;
  for (const auto& [link, bytes] : by_link) {
    if (out.empty() || out.back().first != link) out.emplace_back(link, 0.0);
    out.back().second += bytes;
  }
  return out;
}

void PhaseBuilder::Message(DeviceId a, DeviceId b, double bytes) {
  if (a == b) return;
  cluster_.RouteInto(a, b, route_);
  for (LinkId l : route_) bytes_.Add(l, bytes / tuning_.efficiency);
  max_latency_ = std::max(max_latency_, cluster_.RouteLatency(route_));
  if (cluster_.cross_vendor() == CrossVendorPath::kHostStaged && cluster_.CrossesVendors(a, b)) {
    crossing_.push_back(Sent{a, b, bytes});
  }
}

void PhaseBuilder::BuildInto(int steps, std::vector<CommPhase>& phases) const {
  CommPhase p;
  p.latency_s = steps * (max_latency_ + tuning_.step_latency_s);
  p.link_bytes = bytes_.Sorted();
  HostStagingLegs staging(cluster_);
  for (const Sent& m : crossing_) staging.Message(m.a, m.b, m.bytes, steps);
  staging.Wrap(std::move(p), phases);
}

std::vector<std::vector<DeviceId>> ByVendor(const std::vector<DeviceId>& group, const Cluster& cluster) {
  std::vector<std::vector<DeviceId>> vendors;
  std::vector<DeviceId> first;  // one member of each vendor's list
  for (DeviceId d : group) {
    size_t v = 0;
    while (v < first.size() && cluster.CrossesVendors(first[v], d)) ++v;
    if (v == first.size()) {
      first.push_back(d);
      vendors.push_back({d});
    } else {
      vendors[v].push_back(d);
    }
  }
  return vendors;
}

void MergeParallel(const std::vector<CommPlan>& parallel, CommPlan& into) {
  // Phases run one after another; each inner phase moves on every node (or every rail) at
  // once, so the plans of the parallel sub-rings are merged phase by phase.
  size_t phases = 0;
  for (const auto& p : parallel) phases = std::max(phases, p.phases.size());
  for (size_t i = 0; i < phases; ++i) {
    CommPhase merged;
    LinkLoads loads;
    for (const auto& p : parallel) {
      if (i >= p.phases.size()) continue;
      merged.latency_s = std::max(merged.latency_s, p.phases[i].latency_s);
      for (const auto& [l, b] : p.phases[i].link_bytes) loads.Add(l, b);
    }
    merged.link_bytes = loads.Sorted();
    into.phases.push_back(std::move(merged));
  }
}

std::vector<std::vector<DeviceId>> ByNode(const std::vector<DeviceId>& group, const Cluster& cluster) {
  std::vector<std::vector<DeviceId>> nodes;
  std::vector<int> node_ids;
  for (DeviceId d : group) {
    const int node = cluster.device(d).node;
    auto it = std::find(node_ids.begin(), node_ids.end(), node);
    if (it == node_ids.end()) {
      node_ids.push_back(node);
      nodes.push_back({d});
    } else {
      nodes[static_cast<size_t>(it - node_ids.begin())].push_back(d);
    }
  }
  return nodes;
}

}  // namespace testbed::collectives
