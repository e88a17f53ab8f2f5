#include "hph_topology.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "testbed/status_macros.h"

namespace testbed::hph {

absl::StatusOr<std::vector<DeviceId>> SpeedOrder(Profiles& profiles, const Cluster& cluster) {
  std::vector<std::tuple<double, int, int, DeviceId>> keyed;
  for (const Device& d : cluster.devices()) {
    TESTBED_ASSIGN_OR_RETURN(double t, profiles.ModelTime(d.id));
    keyed.emplace_back(t, d.node, d.local_index, d.id);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<DeviceId> order;
  for (const auto& k : keyed) order.push_back(std::get<3>(k));
  return order;
}

std::vector<Mapping> Mappings(const std::vector<DeviceId>& order, int pp, int dp) {
  std::vector<Mapping> out;
  for (bool stage_major : {true, false}) {
    Mapping m{pp, dp, stage_major, std::vector<DeviceId>(static_cast<size_t>(pp * dp))};
    for (int s = 0; s < pp; ++s) {
      for (int r = 0; r < dp; ++r) {
        const int index = stage_major ? s * dp + r : r * pp + s;
        m.devices[static_cast<size_t>(r * pp + s)] = order[static_cast<size_t>(index)];
      }
    }
    out.push_back(std::move(m));
    if (pp == 1 || dp == 1) break;  // both mappings are the same order
  }
  return out;
}

CommCost CommTime(const Mapping& mapping, const Cluster& cluster, const std::vector<double>& boundary_bytes,
                  const std::vector<double>& grad_bytes) {
  CommCost cost;
  for (int b = 0; b + 1 < mapping.pp; ++b) {
    double slowest = 0;
    for (int r = 0; r < mapping.dp; ++r) {
      const DeviceId a = mapping.At(b, r), c = mapping.At(b + 1, r);
      slowest = std::max(slowest, cluster.PathLatency(a, c) + boundary_bytes[static_cast<size_t>(b)] /
                                                                  cluster.PathBandwidth(a, c));
    }
    cost.per_micro_batch_s += 2 * slowest;
  }
  if (mapping.dp > 1) {
    for (int s = 0; s < mapping.pp; ++s) {
      double bw = std::numeric_limits<double>::infinity();
      for (int r = 0; r < mapping.dp; ++r) {
        bw = std::min(bw, cluster.PathBandwidth(mapping.At(s, r), mapping.At(s, (r + 1) % mapping.dp)));
      }
      cost.stage_all_reduce_s.push_back(2.0 * (mapping.dp - 1) / mapping.dp * grad_bytes[static_cast<size_t>(s)] / bw);
      cost.all_reduce_s = std::max(cost.all_reduce_s, cost.stage_all_reduce_s.back());
    }
  }
  return cost;
}

}  // namespace testbed::hph
