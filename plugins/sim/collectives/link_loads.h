// Helpers shared by the collective algorithms of this plugin: accumulating the bytes each
// link carries when a set of point-to-point messages moves concurrently.
#pragma once

#include <utility>
#include <vector>

#include "testbed/cluster.h"
#include "testbed/collective.h"

namespace testbed::collectives {

// Settings every algorithm takes: the share of a link's nominal bandwidth a collective
// reaches, and a software cost per message step on top of the links' latencies.
struct CommTuning {
  double efficiency = 1.0;
  double step_latency_s = 0.0;
  // Rings a multi-node ring collective is split into (NCCL's channels), each entering the
  // nodes at another member so that each leaves a node through another NIC: 1 = one ring;
  // 0 = one per member of a node.
  int ring_channels = 1;
};

// Bytes per link, summed in the order they are added; taken out ordered by link (as a phase
// lists them). Kept as the list of additions (a phase has few), sorted once at the end.
class LinkLoads {
 public:
  void Add(LinkId link, double bytes) { added_.emplace_back(link, bytes); }
  [[nodiscard]] std::vector<std::pair<LinkId, double>> Sorted() const;

 private:
  std::vector<std::pair<LinkId, double>> added_;
};

class PhaseBuilder {
 public:
  PhaseBuilder(const Cluster& cluster, const CommTuning& tuning) : cluster_(cluster), tuning_(tuning) {}
  // A message of `bytes` from a to b, concurrent with the others of the phase.
  void Message(DeviceId a, DeviceId b, double bytes);
  // Appends the phase: `steps` sequential message rounds, each paying the slowest path's
  // latency. On a cluster that stages cross-vendor transfers through host memory, messages
  // between vendors add a leg before and after it (HostStagingLegs; `steps` rounds each).
  void BuildInto(int steps, std::vector<CommPhase>& phases) const;

 private:
  const Cluster& cluster_;
  const CommTuning& tuning_;
  LinkLoads bytes_;
  std::vector<LinkId> route_;  // the current message's, reused
  double max_latency_ = 0;
  struct Sent {
    DeviceId a, b;
    double bytes;
  };
  std::vector<Sent> crossing_;  // messages between vendors (staged when the cluster says so)
};

// Ranks of `group` by vendor (DeviceSpec::vendor), in group order: the members of each.
[[nodiscard]] std::vector<std::vector<DeviceId>> ByVendor(const std::vector<DeviceId>& group, const Cluster& cluster);

// Runs `parallel` plans at once, phase by phase (each merged phase: the slowest latency and
// the summed link loads), appending the phases to `into`.
void MergeParallel(const std::vector<CommPlan>& parallel, CommPlan& into);

// Ranks of `group` by node, in group order: the members of each node.
[[nodiscard]] std::vector<std::vector<DeviceId>> ByNode(const std::vector<DeviceId>& group, const Cluster& cluster);

}  // namespace testbed::collectives
