#include "link_loads.h"

#include <algorithm>

namespace testbed::collectives {

void PhaseBuilder::Message(DeviceId a, DeviceId b, double bytes) {
  if (a == b) return;
  for (LinkId l : cluster_.Route(a, b)) bytes_[l] += bytes / tuning_.efficiency;
  max_latency_ = std::max(max_latency_, cluster_.PathLatency(a, b));
}

CommPhase PhaseBuilder::Build(int steps) const {
  CommPhase p;
  p.latency_s = steps * (max_latency_ + tuning_.step_latency_s);
  p.link_bytes.assign(bytes_.begin(), bytes_.end());
  return p;
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
