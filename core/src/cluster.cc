#include "testbed/cluster.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

// Routes inside one node type, precomputed once: endpoints are the devices, then the hubs,
// then the NICs; directional local link 2k goes a->b of description link k, 2k+1 b->a.
struct NodeTopology {
  std::vector<std::string> endpoints;
  std::vector<int> link_from, link_to;          // per directional local link
  std::vector<LinkSpec> link_spec;              // per directional local link
  std::vector<std::vector<std::vector<int>>> route;  // [from][to] -> local directional links
  std::vector<int> nic_of_device;               // endpoint index of the device's NIC, -1 if none
  std::vector<int> host_endpoints;              // endpoint index of each host (NodeType::hosts)
  std::vector<int> nearest_host;                // per device: index into host_endpoints, -1 if none
  int num_local_links() const { return static_cast<int>(link_spec.size()); }
  int num_nics = 0;
  int first_nic_endpoint = 0;
};

// Cost of a path for routing: the time to move 1 MiB, so wide links win over few hops.
double EdgeWeight(const LinkSpec& s) {
  return s.latency_s + (s.bandwidth_bytes_per_s > 0 ? 1048576.0 / s.bandwidth_bytes_per_s : 1e9);
}

absl::StatusOr<NodeTopology> BuildTopology(const NodeType& type) {
  NodeTopology t;
  const std::string where = absl::StrCat("node type '", type.name, "'");
  if (type.devices < 1) return absl::InvalidArgumentError(absl::StrCat(where, ": devices must be >= 1"));
  std::map<std::string, int> index;
  auto add = [&](const std::string& name) -> absl::Status {
    if (!index.emplace(name, static_cast<int>(t.endpoints.size())).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": endpoint '", name, "' declared twice"));
    }
    t.endpoints.push_back(name);
    return absl::OkStatus();
  };
  for (int i = 0; i < type.devices; ++i) {
    if (auto s = add(absl::StrCat("gpu", i)); !s.ok()) return s;
  }
  for (const auto& hub : type.hubs) {
    if (auto s = add(hub); !s.ok()) return s;
  }
  t.first_nic_endpoint = static_cast<int>(t.endpoints.size());
  for (const auto& nic : type.nics) {
    if (auto s = add(nic); !s.ok()) return s;
  }
  t.num_nics = static_cast<int>(type.nics.size());
  for (const auto& link : type.links) {
    auto a = index.find(link.a), b = index.find(link.b);
    if (a == index.end() || b == index.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": link ", link.a, " - ", link.b, " names an unknown endpoint; endpoints are ",
          absl::StrJoin(t.endpoints, ", ")));
    }
    if (link.spec.bandwidth_bytes_per_s <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": link ", link.a, " - ", link.b, " has no bandwidth"));
    }
    t.link_from.push_back(a->second);
    t.link_to.push_back(b->second);
    t.link_spec.push_back(link.spec);
    t.link_from.push_back(b->second);
    t.link_to.push_back(a->second);
    t.link_spec.push_back(link.spec);
  }

  // All-pairs shortest paths by Dijkstra from every endpoint (nodes are small).
  const int n = static_cast<int>(t.endpoints.size());
  std::vector<std::vector<int>> out_links(static_cast<size_t>(n));
  for (int l = 0; l < t.num_local_links(); ++l) out_links[static_cast<size_t>(t.link_from[l])].push_back(l);
  t.route.assign(static_cast<size_t>(n), std::vector<std::vector<int>>(static_cast<size_t>(n)));
  std::vector<std::vector<double>> dist(static_cast<size_t>(n));
  for (int src = 0; src < n; ++src) {
    std::vector<double> d(static_cast<size_t>(n), std::numeric_limits<double>::infinity());
    std::vector<int> via(static_cast<size_t>(n), -1);
    using Item = std::pair<double, int>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
    d[static_cast<size_t>(src)] = 0;
    pq.push({0.0, src});
    while (!pq.empty()) {
      auto [du, u] = pq.top();
      pq.pop();
      if (du > d[static_cast<size_t>(u)]) continue;
      for (int l : out_links[static_cast<size_t>(u)]) {
        const int v = t.link_to[static_cast<size_t>(l)];
        const double nd = du + EdgeWeight(t.link_spec[static_cast<size_t>(l)]);
        if (nd < d[static_cast<size_t>(v)]) {
          d[static_cast<size_t>(v)] = nd;
          via[static_cast<size_t>(v)] = l;
          pq.push({nd, v});
        }
      }
    }
    for (int dst = 0; dst < n; ++dst) {
      if (dst == src || via[static_cast<size_t>(dst)] < 0) continue;
      std::vector<int> path;
      for (int v = dst; v != src; v = t.link_from[static_cast<size_t>(via[static_cast<size_t>(v)])]) {
        path.push_back(via[static_cast<size_t>(v)]);
      }
      std::reverse(path.begin(), path.end());
      t.route[static_cast<size_t>(src)][static_cast<size_t>(dst)] = std::move(path);
    }
    dist[static_cast<size_t>(src)] = std::move(d);
  }
  for (int a = 0; a < type.devices; ++a) {
    for (int b = 0; b < type.devices; ++b) {
      if (a != b && t.route[static_cast<size_t>(a)][static_cast<size_t>(b)].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": no path between gpu", a, " and gpu", b));
      }
    }
  }

  // Host memory endpoints, and each device's nearest.
  std::vector<std::string> hosts = type.hosts;
  if (hosts.empty()) {
    for (const auto& hub : type.hubs) {
      if (hub.rfind("cpu", 0) == 0) hosts.push_back(hub);
    }
  }
  for (const auto& h : hosts) {
    auto it = index.find(h);
    if (it == index.end() || it->second < type.devices || it->second >= t.first_nic_endpoint) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": host '", h, "' is not one of its hubs"));
    }
    t.host_endpoints.push_back(it->second);
  }
  t.nearest_host.assign(static_cast<size_t>(type.devices), -1);
  for (int i = 0; i < type.devices; ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < t.host_endpoints.size(); ++k) {
      const double dd = dist[static_cast<size_t>(i)][static_cast<size_t>(t.host_endpoints[k])];
      if (dd < best) {  // strict: ties go to the lowest-numbered host
        best = dd;
        t.nearest_host[static_cast<size_t>(i)] = static_cast<int>(k);
      }
    }
  }

  t.nic_of_device.assign(static_cast<size_t>(type.devices), -1);
  if (!type.nic_of.empty()) {
    if (type.nic_of.size() != static_cast<size_t>(type.devices)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": nic_of lists ", type.nic_of.size(),
                                                     " NICs for ", type.devices, " devices"));
    }
    for (int i = 0; i < type.devices; ++i) {
      auto it = index.find(type.nic_of[static_cast<size_t>(i)]);
      if (it == index.end() || it->second < t.first_nic_endpoint) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": nic_of names '", type.nic_of[static_cast<size_t>(i)],
                                                       "', which is not one of its nics"));
      }
      t.nic_of_device[static_cast<size_t>(i)] = it->second;
    }
  } else {
    for (int i = 0; i < type.devices; ++i) {
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k < t.num_nics; ++k) {
        const int e = t.first_nic_endpoint + k;
        const double dd = dist[static_cast<size_t>(i)][static_cast<size_t>(e)];
        if (dd < best) {  // strict: ties go to the lowest-numbered NIC
          best = dd;
          t.nic_of_device[static_cast<size_t>(i)] = e;
        }
      }
    }
  }
  return t;
}

}  // namespace

struct Cluster::Impl {
  std::string name;
  std::vector<NodeGroup> groups;
  std::vector<NodeTopology> topologies;  // one per group
  std::vector<DeviceSpec> specs;         // one per group
  std::vector<Device> devices;
  std::vector<Link> links;
  std::vector<int> group_of_node;
  std::vector<LinkId> first_link_of_node;  // local links, then per NIC: up, down
  std::vector<DeviceId> first_device_of_node;

  LinkId NicUp(int node, int nic_endpoint) const {
    const NodeTopology& t = topologies[static_cast<size_t>(group_of_node[static_cast<size_t>(node)])];
    return first_link_of_node[static_cast<size_t>(node)] + t.num_local_links() +
           2 * (nic_endpoint - t.first_nic_endpoint);
  }
};

Cluster::Cluster() : impl_(std::make_unique<Impl>()) {}
Cluster::~Cluster() = default;
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;
Cluster::Cluster(const Cluster& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Cluster& Cluster::operator=(const Cluster& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}

absl::StatusOr<Cluster> Cluster::Build(std::string name, std::vector<NodeGroup> groups) {
  Cluster c;
  Impl& im = *c.impl_;
  im.name = std::move(name);
  if (groups.empty()) return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "' has no nodes"));
  int total_nodes = 0;
  for (const NodeGroup& g : groups) {
    if (g.count < 1) {
      return absl::InvalidArgumentError(absl::StrCat("cluster '", im.name, "': node count of '", g.type.name,
                                                     "' must be >= 1"));
    }
    total_nodes += g.count;
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    auto topo = BuildTopology(groups[gi].type);
    if (!topo.ok()) return topo.status();
    if (total_nodes > 1 && topo->num_nics == 0) {
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
  int node = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const NodeType& type = groups[gi].type;
    const NodeTopology& t = im.topologies[gi];
    for (int k = 0; k < groups[gi].count; ++k, ++node) {
      im.group_of_node.push_back(static_cast<int>(gi));
      im.first_link_of_node.push_back(static_cast<LinkId>(im.links.size()));
      im.first_device_of_node.push_back(static_cast<DeviceId>(im.devices.size()));
      for (int l = 0; l < t.num_local_links(); ++l) {
        Link link;
        link.id = static_cast<LinkId>(im.links.size());
        link.node = node;
        link.spec = t.link_spec[static_cast<size_t>(l)];
        link.name = absl::StrCat("n", node, ".", t.endpoints[static_cast<size_t>(t.link_from[static_cast<size_t>(l)])],
                                 ">", t.endpoints[static_cast<size_t>(t.link_to[static_cast<size_t>(l)])]);
        im.links.push_back(std::move(link));
      }
      for (int nic = 0; nic < t.num_nics; ++nic) {
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
  im.groups = std::move(groups);
  return c;
}

const std::string& Cluster::name() const noexcept { return impl_->name; }
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
  if (a == b) return out;
  const Impl& im = *impl_;
  const Device& da = device(a);
  const Device& db = device(b);
  const NodeTopology& ta = im.topologies[static_cast<size_t>(im.group_of_node[static_cast<size_t>(da.node)])];
  const LinkId offa = im.first_link_of_node[static_cast<size_t>(da.node)];
  if (da.node == db.node) {
    for (int l : ta.route[static_cast<size_t>(da.local_index)][static_cast<size_t>(db.local_index)]) {
      out.push_back(offa + l);
    }
    return out;
  }
  const NodeTopology& tb = im.topologies[static_cast<size_t>(im.group_of_node[static_cast<size_t>(db.node)])];
  const LinkId offb = im.first_link_of_node[static_cast<size_t>(db.node)];
  const int nic_a = ta.nic_of_device[static_cast<size_t>(da.local_index)];
  const int nic_b = tb.nic_of_device[static_cast<size_t>(db.local_index)];
  for (int l : ta.route[static_cast<size_t>(da.local_index)][static_cast<size_t>(nic_a)]) out.push_back(offa + l);
  out.push_back(im.NicUp(da.node, nic_a));
  out.push_back(im.NicUp(db.node, nic_b) + 1);
  for (int l : tb.route[static_cast<size_t>(nic_b)][static_cast<size_t>(db.local_index)]) out.push_back(offb + l);
  return out;
}

int Cluster::NumHosts(int node) const {
  const Impl& im = *impl_;
  return static_cast<int>(im.topologies[static_cast<size_t>(im.group_of_node[static_cast<size_t>(node)])].host_endpoints.size());
}

int Cluster::NearestHost(DeviceId device_id) const {
  const Impl& im = *impl_;
  const Device& d = device(device_id);
  return im.topologies[static_cast<size_t>(im.group_of_node[static_cast<size_t>(d.node)])]
      .nearest_host[static_cast<size_t>(d.local_index)];
}

absl::StatusOr<std::vector<LinkId>> Cluster::HostRoute(DeviceId device_id, int host, bool to_device) const {
  const Impl& im = *impl_;
  if (device_id < 0 || device_id >= num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("device ", device_id, " is not in cluster '", im.name, "'"));
  }
  const Device& d = device(device_id);
  const NodeTopology& t = im.topologies[static_cast<size_t>(im.group_of_node[static_cast<size_t>(d.node)])];
  if (host < 0) host = t.nearest_host[static_cast<size_t>(d.local_index)];
  if (host < 0 || host >= static_cast<int>(t.host_endpoints.size())) {
    return absl::InvalidArgumentError(absl::StrCat("node ", d.node, " (", node_type_of(d.node).name, ") has ",
                                                   t.host_endpoints.size(), " host memory endpoints; host ", host,
                                                   " does not exist"));
  }
  const size_t h = static_cast<size_t>(t.host_endpoints[static_cast<size_t>(host)]);
  const size_t g = static_cast<size_t>(d.local_index);
  const LinkId off = im.first_link_of_node[static_cast<size_t>(d.node)];
  std::vector<LinkId> out;
  for (int l : to_device ? t.route[h][g] : t.route[g][h]) out.push_back(off + l);
  return out;
}

double Cluster::PathLatency(DeviceId a, DeviceId b) const {
  double total = 0;
  for (LinkId l : Route(a, b)) total += impl_->links[static_cast<size_t>(l)].spec.latency_s;
  return total;
}

double Cluster::PathBandwidth(DeviceId a, DeviceId b) const {
  double bw = std::numeric_limits<double>::infinity();
  for (LinkId l : Route(a, b)) bw = std::min(bw, impl_->links[static_cast<size_t>(l)].spec.bandwidth_bytes_per_s);
  return bw;
}

std::string Cluster::Describe() const {
  std::vector<std::string> parts;
  for (const NodeGroup& g : impl_->groups) {
    parts.push_back(absl::StrCat(g.count, " x ", g.type.name, " (", g.type.devices, " x ", g.type.device.name, ")"));
  }
  return absl::StrCat(absl::StrJoin(parts, " + "), ", ", num_devices(), " devices");
}

}  // namespace testbed
