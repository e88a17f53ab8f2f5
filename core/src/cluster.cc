#include "testbed/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "memory_budget.h"
#include "node_topology.h"

namespace testbed {

const char* LinkKindName(LinkKind kind) noexcept {
  switch (kind) {
    case LinkKind::kNvlink: return "nvlink";
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kCpuInterconnect: return "cpu";
    case LinkKind::kInfiniband: return "infiniband";
    case LinkKind::kEthernet: return "ethernet";
    case LinkKind::kOther: return "other";
  }
  return "?";
}

namespace {
constexpr const char* kViaNicsName = "via-nic";
constexpr const char* kNicName = "nic";

// "nic<k>" with 0 <= k < kMaxNicRails gives k; -1 for anything else, -2 for a rail out of range.
int ParseRail(absl::string_view part) {
  if (!absl::ConsumePrefix(&part, kNicName) || part.empty()) return -1;
  int rail = 0;
  for (char c : part) {
    if (c < '0' || c > '9') return -1;
    rail = std::min(rail * 10 + (c - '0'), kMaxNicRails);
  }
  return rail < kMaxNicRails ? rail : -2;
}
}  // namespace

std::string LinkKindsName(LinkKinds kinds) {
  const LinkKinds k = kinds & kAllLinkKinds;
  std::vector<std::string> names;
  if (k != 0 && k != kAllLinkKinds) {
    for (int i = 0; i <= static_cast<int>(LinkKind::kOther); ++i) {
      if ((k & LinkKindBit(static_cast<LinkKind>(i))) != 0) names.emplace_back(LinkKindName(static_cast<LinkKind>(i)));
    }
  }
  if ((kinds & kViaNics) != 0) names.emplace_back(kViaNicsName);
  if (NicRailOf(kinds) != 0) names.emplace_back(absl::StrCat(kNicName, NicRailOf(kinds)));
  return names.empty() ? "any" : absl::StrJoin(names, "+");
}

absl::StatusOr<LinkKinds> LinkKindsFromName(const std::string& name) {
  if (name == "any") return LinkKinds{0};
  LinkKinds kinds = 0;
  bool rail_given = false, any_given = false;
  for (absl::string_view part : absl::StrSplit(name, absl::ByAnyChar("+,"))) {
    if (part == "any") {
      any_given = true;
      continue;
    }
    if (const int rail = ParseRail(part); rail != -1) {
      if (rail < 0 || rail_given) {
        return absl::InvalidArgumentError(absl::StrCat("link class '", name, "': ",
                                                       rail < 0 ? absl::StrCat("NIC rail '", part, "' is out of range (nic0 to nic",
                                                                               kMaxNicRails - 1, ")")
                                                                : "names more than one NIC rail"));
      }
      rail_given = true;
      kinds |= NicRail(rail);
      continue;
    }
    bool found = part == kViaNicsName;
    if (found) kinds |= kViaNics;
    for (int k = 0; k <= static_cast<int>(LinkKind::kOther); ++k) {
      if (part == LinkKindName(static_cast<LinkKind>(k))) {
        kinds |= LinkKindBit(static_cast<LinkKind>(k));
        found = true;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat("unknown link kind '", part,
                                                     "' (expected nvlink, pcie, cpu, infiniband, ethernet, other or any, "
                                                     "joined by '+', and via-nic or a NIC rail nic0 to nic",
                                                     kMaxNicRails - 1, ")"));
    }
  }
  if (any_given && (kinds & kAllLinkKinds) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("link class '", name,
                                                   "': 'any' joins only via-nic or a NIC rail, not link kinds"));
  }
  return kinds;
}

using internal::NodeTopology;

struct Cluster::Impl {
  std::string name;
  std::vector<NodeGroup> groups;
  std::vector<NodeTopology> topologies;  // one per group
  Network network;
  CrossVendorPath cross_vendor = CrossVendorPath::kDeviceDirect;
  double host_copy_bytes_per_s = 10e9;
  // Network tiers: the first link of each tier's switches (up, then down, per switch) and how
  // many switches the tier has; tier 0's switch of each (node, NIC) port is computed.
  std::vector<LinkId> first_tier_link;
  std::vector<int> tier_switches;
  int leaves_per_rail = 1;
  std::vector<DeviceSpec> specs;         // one per group
  std::vector<Device> devices;
  std::vector<Link> links;
  std::vector<int> group_of_node;
  std::vector<LinkId> first_link_of_node;  // local links, then per NIC: up, down
  std::vector<DeviceId> first_device_of_node;

  const NodeTopology& Topo(int node) const { return topologies[static_cast<size_t>(group_of_node[static_cast<size_t>(node)])]; }
  LinkId NicUp(int node, int nic_endpoint) const {
    const NodeTopology& t = Topo(node);
    return first_link_of_node[static_cast<size_t>(node)] + t.num_local_links() + 2 * (nic_endpoint - t.first_nic_endpoint());
  }
  // The switch of tier `tier` above NIC port (node, nic).
  int SwitchOf(int tier, int node, int nic) const {
    int id = (network.rails ? nic : 0) * leaves_per_rail + node / network.tiers.front().fan_in;
    for (int t = 1; t <= tier; ++t) id /= network.tiers[static_cast<size_t>(t)].fan_in;
    return id;
  }
  // Links between NIC ports a and b through the tiers: up from a's leaf to the lowest switch
  // they share, then down to b's leaf.
  void Fabric(int node_a, int nic_a, int node_b, int nic_b, std::vector<LinkId>& out) const {
    const int tiers = static_cast<int>(network.tiers.size());
    int top = 0;
    while (top + 1 < tiers && SwitchOf(top, node_a, nic_a) != SwitchOf(top, node_b, nic_b)) ++top;
    for (int t = 0; t < top; ++t) out.push_back(first_tier_link[static_cast<size_t>(t)] + 2 * SwitchOf(t, node_a, nic_a));
    for (int t = top - 1; t >= 0; --t) {
      out.push_back(first_tier_link[static_cast<size_t>(t)] + 2 * SwitchOf(t, node_b, nic_b) + 1);
    }
  }
};

Cluster::Cluster() : impl_(std::make_shared<Impl>()) {}
Cluster::~Cluster() = default;
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;
Cluster::Cluster(const Cluster& other) = default;
Cluster& Cluster::operator=(const Cluster& other) = default;

Cluster Cluster::Over(LinkKinds kinds) const {
  Cluster view(*this);
  const LinkKinds k = kinds & kAllLinkKinds;
  view.route_kinds_ = static_cast<LinkKinds>((k == kAllLinkKinds ? 0 : k) | (kinds & (kViaNics | kNicRailMask)));
  return view;
}

namespace {
// How a view restricts routes, for CheckRoutes' message: "that crosses only nvlink links",
// "that leaves the node through NICs (via-nic)", "through each device's NIC of rail 1 (nic1)".
std::string RouteDescription(LinkKinds kinds) {
  std::vector<std::string> parts;
  if ((kinds & kAllLinkKinds) != 0) {
    parts.push_back(absl::StrCat("crosses only ", LinkKindsName(kinds & kAllLinkKinds), " links"));
  }
  if ((kinds & kViaNics) != 0) parts.emplace_back("leaves the node through NICs (via-nic)");
  if (NicRailOf(kinds) != 0) {
    parts.push_back(absl::StrCat("leaves a node through each device's NIC of rail ", NicRailOf(kinds), " (nic",
                                 NicRailOf(kinds), "; a device's NICs are listed in its node's nic_of)"));
  }
  return absl::StrJoin(parts, " and ");
}
}  // namespace

absl::Status Cluster::CheckRoutes(const std::vector<DeviceId>& group) const {
  if (route_kinds_ == 0) return absl::OkStatus();
  for (DeviceId a : group) {
    for (DeviceId b : group) {
      if (a != b && Route(a, b).empty()) {
        return absl::InvalidArgumentError(absl::StrCat("no route from device ", a, " to device ", b, " in cluster '",
                                                       impl_->name, "' ",
                                                       RouteDescription(route_kinds_)));
      }
    }
  }
  return absl::OkStatus();
}

double Cluster::EstimateBytes(const std::vector<NodeGroup>& groups, const ClusterOptions& options) {
  const Network& network = options.network;
  // Per device, per directional link (with its name) and per node: what Build allocates.
  constexpr double kDevice = sizeof(Device), kLink = sizeof(Link) + 32, kNode = 64;
  double bytes = 0, nodes = 0, nics = 1;
  for (const NodeGroup& g : groups) {
    const double local = 2.0 * static_cast<double>(g.type.links.size()) + 2.0 * static_cast<double>(g.type.nics.size());
    bytes += static_cast<double>(g.count) * (static_cast<double>(g.type.devices) * kDevice + local * kLink + kNode);
    nodes += g.count;
    nics = std::max(nics, static_cast<double>(g.type.nics.size()));
    if (options.all_pairs_routes) {
      // A stored route per ordered pair of endpoints: a vector and a few link ids.
      const double endpoints = static_cast<double>(g.type.devices + g.type.hubs.size() + g.type.nics.size());
      // (a heap block of at least 32 bytes behind each: what malloc gives for a few ints).
      bytes += endpoints * endpoints * (sizeof(std::vector<int>) + 32);
    }
  }
  // An up and a down link per switch of every tier but the top.
  double units = nodes;
  for (size_t t = 0; t + 1 < network.tiers.size(); ++t) {
    units = std::ceil(units / std::max(1, network.tiers[t].fan_in)) * (t == 0 && network.rails ? nics : 1);
    bytes += 2 * units * kLink;
  }
  return bytes;
}

absl::StatusOr<Cluster> Cluster::Build(std::string name, std::vector<NodeGroup> groups, const ClusterOptions& options) {
  Cluster c;
  Impl& im = *c.impl_;
  im.name = std::move(name);
  im.network = options.network;
  im.cross_vendor = options.cross_vendor;
  im.host_copy_bytes_per_s = options.host_copy_bytes_per_s;
  if (options.cross_vendor == CrossVendorPath::kHostStaged && !(options.host_copy_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name,
                                                   "': host-staged cross-vendor transfers need a host copy bandwidth > 0"));
  }
  if (groups.empty()) return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "' has no nodes"));
  if (absl::Status s = CheckMemoryAllowance(absl::StrCat("cluster '", im.name, "'"), EstimateBytes(groups, options),
                                            options.memory_limit_bytes, "use fewer nodes");
      !s.ok()) {
    return s;
  }
  for (size_t t = 0; t < im.network.tiers.size(); ++t) {
    NetworkTier& tier = im.network.tiers[t];
    // The top tier joins everything below it: its fan-in only needs to be large.
    if (t + 1 == im.network.tiers.size() && tier.fan_in <= 0) tier.fan_in = 1 << 30;
    if (tier.fan_in < 1) {
      return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "': network tier '", tier.name,
                                                     "' groups ", tier.fan_in, " units; at least 1"));
    }
    if (t + 1 < im.network.tiers.size() && tier.uplink.bandwidth_bytes_per_s <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "': network tier '", tier.name,
                                                     "' has no uplink bandwidth"));
    }
  }
  int total_nodes = 0;
  for (const NodeGroup& g : groups) {
    if (g.count < 1) {
      return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "': node count of '", g.type.name,
                                                     "' must be >= 1"));
    }
    total_nodes += g.count;
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    auto topo = NodeTopology::Build(groups[gi].type, options.all_pairs_routes);
    if (!topo.ok()) return topo.status();
    if (total_nodes > 1 && topo->num_nics() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "': node type '", groups[gi].type.name,
                                                     "' has no NIC, so its nodes cannot reach each other"));
    }
    if (total_nodes > 1 && groups[gi].type.nic_link.bandwidth_bytes_per_s <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "': node type '", groups[gi].type.name,
                                                     "' has no nic_link bandwidth"));
    }
    im.topologies.push_back(std::move(*topo));
    im.specs.push_back(groups[gi].type.device);
  }
  {
    size_t links = 0, devices = 0;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const NodeTopology& t = im.topologies[gi];
      links += static_cast<size_t>(groups[gi].count) * static_cast<size_t>(t.num_local_links() + 2 * t.num_nics());
      devices += static_cast<size_t>(groups[gi].count) * static_cast<size_t>(groups[gi].type.devices);
    }
    im.links.reserve(links);
    im.devices.reserve(devices);
    im.group_of_node.reserve(static_cast<size_t>(total_nodes));
    im.first_link_of_node.reserve(static_cast<size_t>(total_nodes));
    im.first_device_of_node.reserve(static_cast<size_t>(total_nodes));
  }
  int node = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const NodeType& type = groups[gi].type;
    const NodeTopology& t = im.topologies[gi];
    for (int k = 0; k < groups[gi].count; ++k, ++node) {
      if (total_nodes > 1) {
        for (int i = 0; i < type.devices; ++i) {
          if (t.nic_of_device(i) < 0) {
            return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "': in node type '", type.name,
                                                           "' gpu", i, " reaches no NIC"));
          }
        }
      }
      im.group_of_node.push_back(static_cast<int>(gi));
      im.first_link_of_node.push_back(static_cast<LinkId>(im.links.size()));
      im.first_device_of_node.push_back(static_cast<DeviceId>(im.devices.size()));
      for (int l = 0; l < t.num_local_links(); ++l) {
        Link link;
        link.id = static_cast<LinkId>(im.links.size());
        link.node = node;
        link.spec = t.link_spec(l);
        link.name = absl::StrCat("n", node, ".", t.endpoint(t.link_from(l)), ">", t.endpoint(t.link_to(l)));
        im.links.push_back(std::move(link));
      }
      for (int nic = 0; nic < t.num_nics(); ++nic) {
        const std::string& nic_name = type.nics[static_cast<size_t>(nic)];
        for (int dir = 0; dir < 2; ++dir) {
          Link link;
          link.id = static_cast<LinkId>(im.links.size());
          link.node = node;
          link.spec = type.nic_link;
          link.name = dir == 0 ? absl::StrCat("n", node, ".", nic_name, ">fabric")
                               : absl::StrCat("fabric>n", node, ".", nic_name);
          im.links.push_back(std::move(link));
        }
      }
      for (int i = 0; i < type.devices; ++i) {
        im.devices.push_back(Device{static_cast<DeviceId>(im.devices.size()), node, i, static_cast<int>(gi)});
      }
    }
  }
  // Network tiers: an up and a down link per switch of every tier but the top.
  if (!im.network.tiers.empty()) {
    int max_nics = 1;
    for (const NodeTopology& t : im.topologies) max_nics = std::max(max_nics, t.num_nics());
    const int fan0 = im.network.tiers.front().fan_in;
    im.leaves_per_rail = (total_nodes + fan0 - 1) / fan0;
    int switches = (im.network.rails ? max_nics : 1) * im.leaves_per_rail;
    for (size_t t = 0; t < im.network.tiers.size(); ++t) {
      if (t > 0) switches = (switches + im.network.tiers[t].fan_in - 1) / im.network.tiers[t].fan_in;
      im.tier_switches.push_back(switches);
      im.first_tier_link.push_back(static_cast<LinkId>(im.links.size()));
      if (t + 1 == im.network.tiers.size()) break;
      const NetworkTier& tier = im.network.tiers[t];
      const std::string& above = im.network.tiers[t + 1].name;
      for (int sw = 0; sw < switches; ++sw) {
        for (int dir = 0; dir < 2; ++dir) {
          Link link;
          link.id = static_cast<LinkId>(im.links.size());
          link.spec = tier.uplink;
          link.name = dir == 0 ? absl::StrCat(tier.name, sw, ">", above) : absl::StrCat(above, ">", tier.name, sw);
          im.links.push_back(std::move(link));
        }
      }
    }
  }
  im.groups = std::move(groups);
  return c;
}

const std::string& Cluster::name() const noexcept { return impl_->name; }
CrossVendorPath Cluster::cross_vendor() const noexcept { return impl_->cross_vendor; }
double Cluster::host_copy_bytes_per_s() const noexcept { return impl_->host_copy_bytes_per_s; }
bool Cluster::CrossesVendors(DeviceId a, DeviceId b) const {
  const Device& da = device(a);
  const Device& db = device(b);
  return da.spec_index != db.spec_index && spec_of(a).vendor != spec_of(b).vendor;
}

const char* CrossVendorPathName(CrossVendorPath path) noexcept {
  return path == CrossVendorPath::kHostStaged ? "host_staged" : "device_direct";
}
int Cluster::num_devices() const noexcept { return static_cast<int>(impl_->devices.size()); }
int Cluster::num_nodes() const noexcept { return static_cast<int>(impl_->group_of_node.size()); }
const std::vector<Device>& Cluster::devices() const noexcept { return impl_->devices; }
const std::vector<DeviceSpec>& Cluster::device_specs() const noexcept { return impl_->specs; }
const DeviceSpec& Cluster::spec_of(DeviceId id) const {
  return impl_->specs[static_cast<size_t>(device(id).spec_index)];
}
const std::vector<NodeGroup>& Cluster::groups() const noexcept { return impl_->groups; }
const NodeType& Cluster::node_type_of(int node) const {
  return impl_->groups[static_cast<size_t>(impl_->group_of_node[static_cast<size_t>(node)])].type;
}
const std::vector<Link>& Cluster::links() const noexcept { return impl_->links; }

std::vector<LinkId> Cluster::Route(DeviceId a, DeviceId b) const {
  std::vector<LinkId> out;
  RouteInto(a, b, out);
  return out;
}

void Cluster::RouteInto(DeviceId a, DeviceId b, std::vector<LinkId>& out) const {
  out.clear();
  if (a == b) return;
  const Impl& im = *impl_;
  const Device& da = device(a);
  const Device& db = device(b);
  const NodeTopology& ta = im.Topo(da.node);
  const LinkId offa = im.first_link_of_node[static_cast<size_t>(da.node)];
  const LinkKinds kinds = route_kinds_ & kAllLinkKinds;
  const bool via_nics = (route_kinds_ & kViaNics) != 0;
  // Appends the local route (on a view: over its kinds only); false when there is none.
  auto local = [&](const NodeTopology& t, LinkId off, int from, int to) {
    if (from == to) return true;
    if (kinds == 0) return t.AppendRoute(from, to, off, out);
    const std::vector<int> path = t.RouteOver(from, to, kinds);
    for (int l : path) out.push_back(off + l);
    return !path.empty();
  };
  if (da.node == db.node && !via_nics) {
    if (!local(ta, offa, da.local_index, db.local_index)) out.clear();
    return;
  }
  const NodeTopology& tb = im.Topo(db.node);
  const LinkId offb = im.first_link_of_node[static_cast<size_t>(db.node)];
  const int rail = NicRailOf(route_kinds_);
  const int nic_a = ta.nic_of_device(da.local_index, rail);
  const int nic_b = tb.nic_of_device(db.local_index, rail);
  if (nic_a < 0 || nic_b < 0 || !local(ta, offa, da.local_index, nic_a)) {
    out.clear();
    return;
  }
  out.push_back(im.NicUp(da.node, nic_a));
  if (!im.network.tiers.empty()) {
    im.Fabric(da.node, nic_a - ta.first_nic_endpoint(), db.node, nic_b - tb.first_nic_endpoint(), out);
  }
  out.push_back(im.NicUp(db.node, nic_b) + 1);
  if (!local(tb, offb, nic_b, db.local_index)) {
    out.clear();
    return;
  }
  if (kinds != 0) {
    for (LinkId l : out) {
      if ((LinkKindBit(im.links[static_cast<size_t>(l)].spec.kind) & kinds) == 0) {
        out.clear();
        return;
      }
    }
  }
}

int Cluster::NumHosts(int node) const {
  const Impl& im = *impl_;
  return static_cast<int>(im.Topo(node).host_endpoints().size());
}

int Cluster::NearestHost(DeviceId device_id) const {
  const Impl& im = *impl_;
  const Device& d = device(device_id);
  return im.Topo(d.node).nearest_host(d.local_index);
}

absl::StatusOr<std::vector<LinkId>> Cluster::HostRoute(DeviceId device_id, int host, bool to_device) const {
  const Impl& im = *impl_;
  if (device_id < 0 || device_id >= num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("device ", device_id, " is not in cluster '", im.name, "'"));
  }
  const Device& d = device(device_id);
  const NodeTopology& t = im.Topo(d.node);
  if (host < 0) host = t.nearest_host(d.local_index);
  if (host < 0 || host >= static_cast<int>(t.host_endpoints().size())) {
    return absl::InvalidArgumentError(absl::StrCat("node ", d.node, " (", node_type_of(d.node).name, ") has ",
                                                   t.host_endpoints().size(), " host memory endpoints; host ", host,
                                                   " does not exist"));
  }
  const int h = t.host_endpoints()[static_cast<size_t>(host)];
  const int g = d.local_index;
  const LinkId off = im.first_link_of_node[static_cast<size_t>(d.node)];
  std::vector<LinkId> out;
  for (int l : to_device ? t.Route(h, g) : t.Route(g, h)) out.push_back(off + l);
  return out;
}

double Cluster::PathLatency(DeviceId a, DeviceId b) const {
  thread_local std::vector<LinkId> route;  // reused: collective plans ask for thousands of paths
  RouteInto(a, b, route);
  return RouteLatency(route);
}

double Cluster::RouteLatency(std::span<const LinkId> route) const {
  double total = 0;
  for (LinkId l : route) total += impl_->links[static_cast<size_t>(l)].spec.latency_s;
  return total;
}

double Cluster::PathBandwidth(DeviceId a, DeviceId b) const {
  thread_local std::vector<LinkId> route;
  RouteInto(a, b, route);
  double bw = std::numeric_limits<double>::infinity();
  for (LinkId l : route) bw = std::min(bw, impl_->links[static_cast<size_t>(l)].spec.bandwidth_bytes_per_s);
  return bw;
}

std::string Cluster::Describe() const {
  std::vector<std::string> parts;
  for (const NodeGroup& g : impl_->groups) {
    parts.push_back(absl::StrCat(g.count, " x ", g.type.name, " (", g.type.devices, " x ", g.type.device.name, ")"));
  }
  return absl::StrCat(absl::StrJoin(parts, " + "), ", ", num_devices(), " devices",
                      impl_->cross_vendor == CrossVendorPath::kHostStaged ? ", cross-vendor transfers host-staged" : "");
}

}  // namespace testbed
