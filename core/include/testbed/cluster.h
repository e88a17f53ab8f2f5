// A cluster: devices grouped into nodes, the links between them (NVLink, PCIe, CPU
// interconnect, InfiniBand, ...) and a topology that answers "which links does a transfer
// from device a to device b cross". Heterogeneous clusters (several node types, several
// device kinds) are the normal case. Links are directional: a full-duplex link is two.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/device_spec.h"

namespace testbed {

using DeviceId = std::int32_t;
using LinkId = std::int32_t;

enum class LinkKind { kNvlink, kPcie, kCpuInterconnect, kInfiniband, kEthernet, kOther };
[[nodiscard]] const char* LinkKindName(LinkKind kind) noexcept;

// A set of link kinds, one bit per LinkKind (bit k for the kind of value k), with two route
// options beside them (kViaNics, a NIC rail). 0 stands for every kind where a set restricts
// routes ("route as usual").
using LinkKinds = std::uint16_t;
[[nodiscard]] constexpr LinkKinds LinkKindBit(LinkKind kind) noexcept {
  return static_cast<LinkKinds>(1u << static_cast<unsigned>(kind));
}
inline constexpr LinkKinds kAllLinkKinds = 0x3f;
// A route flag beside the kinds ("via-nic"): two devices of one node route out through their
// own NICs and back through the network (the first switch they share: up the one NIC's link
// and down the other's), as NCCL's network transport does inside a node when peer-to-peer and
// shared memory are off, so that in-node traffic can use the NICs beside NVLink. Devices of
// different nodes route as usual. The kinds, when given, still restrict every link crossed.
inline constexpr LinkKinds kViaNics = 0x40;
// A NIC rail beside the kinds ("nic1"): a route that leaves a node leaves it through the
// device's NIC of that rail (NodeType::nic_of lists a device's NICs, rail 0 first) and enters
// the other node through its device's NIC of the same rail. Rail 0 (no bits) is every
// device's first NIC, the usual route; a device without a NIC of the rail has no such route.
// Bits 8-11 hold the rail, so rails 0 to 15.
inline constexpr int kNicRailShift = 8;
inline constexpr LinkKinds kNicRailMask = 0x0f00;
inline constexpr int kMaxNicRails = 16;
[[nodiscard]] constexpr LinkKinds NicRail(int rail) noexcept {
  return static_cast<LinkKinds>((static_cast<unsigned>(rail) << kNicRailShift) & kNicRailMask);
}
[[nodiscard]] constexpr int NicRailOf(LinkKinds kinds) noexcept {
  return static_cast<int>((kinds & kNicRailMask) >> kNicRailShift);
}
// "nvlink", "pcie+cpu", "any" (for 0 or every kind), "via-nic", "pcie+infiniband+via-nic",
// "nic1", "via-nic+nic1".
[[nodiscard]] std::string LinkKindsName(LinkKinds kinds);
// Parses names joined by '+' or ',' ("pcie+cpu", "via-nic", "any+nic1"); "any" gives 0 (and
// adds nothing beside a rail). InvalidArgument naming the unknown kind and the known ones, or
// a rail out of range or given twice.
[[nodiscard]] absl::StatusOr<LinkKinds> LinkKindsFromName(const std::string& name);

struct LinkSpec {
  std::string type;  // name of the link type in the node description, e.g. "pcie3_x16"
  LinkKind kind = LinkKind::kOther;
  double bandwidth_bytes_per_s = 0.0;  // per direction
  double latency_s = 0.0;
};

// One directional link.
struct Link {
  LinkId id = 0;
  std::string name;  // "n0.gpu0>n0.cpu0", "n0.nic0>fabric"
  int node = -1;     // node it belongs to; -1 for nothing (never: NIC links belong to their node)
  LinkSpec spec;
};

struct Device {
  DeviceId id = 0;
  int node = 0;
  int local_index = 0;  // index within its node
  int spec_index = 0;   // into Cluster::device_specs()
};

// A node type: its devices and internal topology. Endpoints are the devices ("gpu0" ...),
// hubs (CPU sockets, PCIe switches, NVSwitch) and NICs; links join two endpoints.
struct NodeType {
  struct LocalLink {
    std::string a, b;  // endpoint names
    LinkSpec spec;
  };
  std::string name;
  std::string doc;
  DeviceSpec device;
  int devices = 1;
  std::vector<std::string> hubs;
  // Hubs that stand for host memory (CPU sockets): the ends of host-to-device copies. Empty:
  // the hubs whose names start with "cpu".
  std::vector<std::string> hosts;
  std::vector<std::string> nics;
  std::vector<LocalLink> links;  // full duplex
  LinkSpec nic_link;             // NIC to the inter-node fabric, per direction
  // NIC used by each device for inter-node traffic (empty: the nearest NIC). An entry may name
  // several NICs joined by '+' ("nic0+nic1"): the device's NIC of rail 0, rail 1, ... (a link
  // class "nic1" routes over the second; the usual routes use the first).
  std::vector<std::string> nic_of;
};

struct NodeGroup {
  NodeType type;
  int count = 1;
};

// The network between nodes, as tiers of switches. Without tiers every NIC port reaches every
// other through one ideal fabric (only the NIC links are shared). With tiers, tier 0 groups
// `fan_in` consecutive nodes' NIC ports under one switch (a leaf; with `rails`, NIC k of those
// nodes goes to a leaf of rail k), each further tier groups `fan_in` switches of the tier below,
// and every switch but the top tier's has an uplink of `uplink` (per direction, the whole
// switch's: an oversubscribed leaf has less than its ports). The top tier joins everything
// below it (its fan_in may be 0). A transfer climbs to the lowest switch the two ports share
// and comes down; switches themselves are non-blocking, only their uplinks are shared.
struct NetworkTier {
  std::string name;  // "leaf", "spine", ...
  int fan_in = 1;   // units of the tier below under one switch (top tier: 0 = all)
  LinkSpec uplink;   // to the next tier (ignored for the top tier)
};
struct Network {
  std::vector<NetworkTier> tiers;
  bool rails = false;
};

// How bytes move between devices of different vendors (DeviceSpec::vendor), e.g. between an
// NVIDIA island and an Ascend island of one cluster (H2).
enum class CrossVendorPath : std::uint8_t {
  // Device-direct RDMA (H2's DiComm): the same route as between any two devices.
  kDeviceDirect,
  // Staged through host memory: the sender's device copies to its host over PCIe, the host
  // copies the buffer once (into the other vendor's runtime's registered memory, at
  // `host_copy_bytes_per_s`), the network carries it as it would device to device, and the
  // receiver's host copies it to the device over PCIe. Store-and-forward: the legs add up.
  kHostStaged,
};
[[nodiscard]] const char* CrossVendorPathName(CrossVendorPath path) noexcept;

struct ClusterOptions {
  Network network;
  CrossVendorPath cross_vendor = CrossVendorPath::kDeviceDirect;
  // Host memory copy bandwidth of a host-staged cross-vendor transfer (one copy per message).
  double host_copy_bytes_per_s = 10e9;
  // Compute and store every route inside each node type when the cluster is built (the
  // previous behaviour, kept as a reference); by default routes are found per source on use.
  bool all_pairs_routes = false;
  // Refuse to build a cluster whose description would take more than this many bytes
  // (estimated before building; 0: half the memory available to the process).
  double memory_limit_bytes = 0;
};

class Cluster {
 public:
  // Builds the topology (routes inside a node type are found on first use: NodeTopology). Fails on an
  // inconsistent description (a link naming an unknown endpoint, a device with no path to
  // a NIC when there are several nodes, ...).
  [[nodiscard]] static absl::StatusOr<Cluster> Build(std::string name, std::vector<NodeGroup> groups,
                                                     const ClusterOptions& options = {});
  // Bytes the description of a cluster of these groups takes (devices, links, per-node
  // tables, all-pairs routes when asked for), estimated before building it. Routes found
  // lazily later are extra (one tree of endpoint count ints per source endpoint used).
  [[nodiscard]] static double EstimateBytes(const std::vector<NodeGroup>& groups, const ClusterOptions& options);

  Cluster();
  ~Cluster();
  Cluster(Cluster&&) noexcept;
  Cluster& operator=(Cluster&&) noexcept;
  Cluster(const Cluster&);
  Cluster& operator=(const Cluster&);

  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] int num_devices() const noexcept;
  [[nodiscard]] int num_nodes() const noexcept;
  [[nodiscard]] const std::vector<Device>& devices() const noexcept;
  [[nodiscard]] const Device& device(DeviceId id) const { return devices()[static_cast<size_t>(id)]; }
  [[nodiscard]] const std::vector<DeviceSpec>& device_specs() const noexcept;
  [[nodiscard]] const DeviceSpec& spec_of(DeviceId id) const;
  [[nodiscard]] const std::vector<NodeGroup>& groups() const noexcept;
  [[nodiscard]] const NodeType& node_type_of(int node) const;
  [[nodiscard]] const std::vector<Link>& links() const noexcept;
  [[nodiscard]] bool SameNode(DeviceId a, DeviceId b) const { return device(a).node == device(b).node; }
  // Whether a and b are devices of different vendors (DeviceSpec::vendor; an empty vendor
  // counts as a vendor of its own name, so a cluster of unnamed vendors has no crossing).
  [[nodiscard]] bool CrossesVendors(DeviceId a, DeviceId b) const;
  // How transfers between vendors move (ClusterOptions), and the host copy bandwidth of the
  // staged path.
  [[nodiscard]] CrossVendorPath cross_vendor() const noexcept;
  [[nodiscard]] double host_copy_bytes_per_s() const noexcept;

  // The same cluster, whose routes cross only links of `kinds` (0: every kind; the view then
  // routes as the cluster does). Link ids are the cluster's, so transfers planned on a view
  // share links with those planned on the cluster. Cheap: views share the topology.
  // A transfer pinned to one link class (an all-gather over NVLink while another runs over
  // PCIe, HSDP) is planned on such a view.
  [[nodiscard]] Cluster Over(LinkKinds kinds) const;
  // The kinds routes may cross (0: every kind), with kViaNics when in-node pairs route through
  // their NICs, and the NIC rail routes leave a node through (NicRailOf).
  [[nodiscard]] LinkKinds route_kinds() const noexcept { return route_kinds_; }
  // OK when every ordered pair of `group` has a route over route_kinds(); otherwise
  // InvalidArgument naming the first pair without one and the kinds allowed.
  [[nodiscard]] absl::Status CheckRoutes(const std::vector<DeviceId>& group) const;

  // The directional links a transfer from a to b crosses, in order (empty when a == b, and
  // on a view when no route crosses only its kinds: see CheckRoutes).
  [[nodiscard]] std::vector<LinkId> Route(DeviceId a, DeviceId b) const;
  // The same into `out` (cleared first), reusing its buffer.
  void RouteInto(DeviceId a, DeviceId b, std::vector<LinkId>& out) const;
  // Host memory of a node (NodeType::hosts, in order): copies between a host and a device
  // cross the node's links between the socket and the device (PCIe switches, the root
  // complex), so they contend with NIC and peer traffic on the links they share.
  [[nodiscard]] int NumHosts(int node) const;
  // The host nearest to `device` (-1 when its node has none).
  [[nodiscard]] int NearestHost(DeviceId device) const;
  // The directional links of a copy between host `host` of the device's node (-1: the
  // nearest) and `device`. Errors: InvalidArgument for a host the node does not have.
  [[nodiscard]] absl::StatusOr<std::vector<LinkId>> HostRoute(DeviceId device, int host, bool to_device) const;
  // Sum of latencies and smallest bandwidth along Route(a, b).
  [[nodiscard]] double PathLatency(DeviceId a, DeviceId b) const;
  // Sum of latencies along a route already found (RouteInto), in its order.
  [[nodiscard]] double RouteLatency(std::span<const LinkId> route) const;
  [[nodiscard]] double PathBandwidth(DeviceId a, DeviceId b) const;

  // "4 nodes x hpwnv (4 x rtx3090), 16 devices"
  [[nodiscard]] std::string Describe() const;

 private:
  struct Impl;
  // Immutable once built, so copies and views share it.
  std::shared_ptr<Impl> impl_;
  LinkKinds route_kinds_ = 0;
};

}  // namespace testbed
