#include "node_topology.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace testbed::internal {
namespace {

// Cost of a path for routing: the time to move 1 MiB, so wide links win over few hops.
double EdgeWeight(const LinkSpec& s) {
  return s.latency_s + (s.bandwidth_bytes_per_s > 0 ? 1048576.0 / s.bandwidth_bytes_per_s : 1e9);
}

}  // namespace

std::vector<int> NodeTopology::Tree(int src, std::vector<double>* dist, LinkKinds kinds) const {
  const size_t n = endpoints_.size();
  std::vector<double> d(n, std::numeric_limits<double>::infinity());
  std::vector<int> via(n, -1);
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
  d[static_cast<size_t>(src)] = 0;
  pq.push({0.0, src});
  while (!pq.empty()) {
    auto [du, u] = pq.top();
    pq.pop();
    if (du > d[static_cast<size_t>(u)]) continue;
    for (int l : out_links_[static_cast<size_t>(u)]) {
      if ((LinkKindBit(link_spec_[static_cast<size_t>(l)].kind) & kinds) == 0) continue;
      const int v = link_to_[static_cast<size_t>(l)];
      const double nd = du + EdgeWeight(link_spec_[static_cast<size_t>(l)]);
      if (nd < d[static_cast<size_t>(v)]) {
        d[static_cast<size_t>(v)] = nd;
        via[static_cast<size_t>(v)] = l;
        pq.push({nd, v});
      }
    }
  }
  if (dist != nullptr) *dist = std::move(d);
  return via;
}

const std::vector<int>& NodeTopology::CachedTree(int src) const {
  if (const std::vector<int>* tree = cache_->slots[static_cast<size_t>(src)].load(std::memory_order_acquire)) {
    return *tree;
  }
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (const std::vector<int>* tree = cache_->slots[static_cast<size_t>(src)].load(std::memory_order_relaxed)) {
    return *tree;
  }
  auto tree = std::make_unique<const std::vector<int>>(Tree(src, nullptr));
  const std::vector<int>& out = *tree;
  cache_->Put(src, std::move(tree));
  return out;
}

std::vector<int> NodeTopology::RouteOver(int from, int to, LinkKinds kinds) const {
  if (from == to) return {};
  const std::vector<int> via = Tree(from, nullptr, kinds);
  std::vector<int> path;
  for (int v = to; v != from; v = link_from_[static_cast<size_t>(via[static_cast<size_t>(v)])]) {
    if (via[static_cast<size_t>(v)] < 0) return {};
    path.push_back(via[static_cast<size_t>(v)]);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

bool NodeTopology::AppendRoute(int from, int to, std::int32_t offset, std::vector<std::int32_t>& out) const {
  if (from == to) return true;
  const size_t head = out.size();
  if (all_ != nullptr) {
    const std::vector<int>& path = (*all_)[static_cast<size_t>(from)][static_cast<size_t>(to)];
    for (int l : path) out.push_back(offset + l);
    return !path.empty();
  }
  // An endpoint with one link out (a device behind one switch) routes everywhere through its
  // neighbour: the neighbour's tree serves it, so N such devices cost one tree, not N.
  // (Links are full duplex, so the neighbour has a link back: if that is its only one, the
  // two are an island and `to` is out of reach.)
  if (out_links_[static_cast<size_t>(from)].size() == 1) {
    const int l = out_links_[static_cast<size_t>(from)].front();
    out.push_back(offset + l);
    from = link_to_[static_cast<size_t>(l)];
    if (from == to) return true;
    if (out_links_[static_cast<size_t>(from)].size() == 1) {
      out.resize(head);
      return false;
    }
  }
  const size_t tail = out.size();
  const std::vector<int>& via = CachedTree(from);
  for (int v = to; v != from; v = link_from_[static_cast<size_t>(via[static_cast<size_t>(v)])]) {
    if (via[static_cast<size_t>(v)] < 0) {
      out.resize(head);
      return false;
    }
    out.push_back(offset + via[static_cast<size_t>(v)]);
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(tail), out.end());
  return true;
}

std::vector<int> NodeTopology::Route(int from, int to) const {
  std::vector<int> path;
  (void)AppendRoute(from, to, 0, path);  // left empty when out of reach
  return path;
}

absl::StatusOr<NodeTopology> NodeTopology::Build(const NodeType& type, bool all_pairs) {
  NodeTopology t;

  const std::string where = absl::StrCat("node type '", type.name, "'");
  if (type.devices < 1) return absl::InvalidArgumentError(absl::StrCat(where, ": devices must be >= 1"));
  t.devices_ = type.devices;
  std::map<std::string, int> index;
  auto add = [&](const std::string& name) -> absl::Status {
    if (!index.emplace(name, static_cast<int>(t.endpoints_.size())).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": endpoint '", name, "' declared twice"));
    }
    t.endpoints_.push_back(name);
    return absl::OkStatus();
  };
  for (int i = 0; i < type.devices; ++i) {
    if (auto s = add(absl::StrCat("gpu", i)); !s.ok()) return s;
  }
  for (const auto& hub : type.hubs) {
    if (auto s = add(hub); !s.ok()) return s;
  }
  t.first_nic_ = static_cast<int>(t.endpoints_.size());
  for (const auto& nic : type.nics) {
    if (auto s = add(nic); !s.ok()) return s;
  }
  t.num_nics_ = static_cast<int>(type.nics.size());
  // Directional local link 2k goes a -> b of description link k, 2k + 1 b -> a.
  for (const auto& link : type.links) {
    auto a = index.find(link.a), b = index.find(link.b);
    if (a == index.end() || b == index.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": link ", link.a, " - ", link.b,
                                                     " names an unknown endpoint; endpoints are ",
                                                     absl::StrJoin(t.endpoints_, ", ")));
    }
    if (link.spec.bandwidth_bytes_per_s <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": link ", link.a, " - ", link.b, " has no bandwidth"));
    }
    for (auto [from, to] : {std::pair{a->second, b->second}, {b->second, a->second}}) {
      t.link_from_.push_back(from);
      t.link_to_.push_back(to);
      t.link_spec_.push_back(link.spec);
    }
  }
  const size_t n = t.endpoints_.size();
  t.out_links_.assign(n, {});
  for (int l = 0; l < t.num_local_links(); ++l) t.out_links_[static_cast<size_t>(t.link_from_[static_cast<size_t>(l)])].push_back(l);
  t.cache_ = std::make_shared<Cache>(n);

  // Every device reaches every other: links are full duplex, so one tree from gpu0 says it.
  const std::vector<int> from0 = t.Tree(0, nullptr);
  for (int d = 1; d < type.devices; ++d) {
    if (from0[static_cast<size_t>(d)] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": no path between gpu0 and gpu", d));
    }
  }

  // Host memory endpoints and NICs, and each device's nearest. With one of them there is
  // nothing to compare; with several, distances from each device (its routing tree, kept).
  std::vector<std::string> hosts = type.hosts;
  if (hosts.empty()) {
    for (const auto& hub : type.hubs) {
      if (hub.rfind("cpu", 0) == 0) hosts.push_back(hub);
    }
  }
  for (const auto& h : hosts) {
    auto it = index.find(h);
    if (it == index.end() || it->second < type.devices || it->second >= t.first_nic_) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": host '", h, "' is not one of its hubs"));
    }
    t.host_endpoints_.push_back(it->second);
  }
  const bool choose_nic = type.nic_of.empty() && t.num_nics_ > 1;
  const bool choose_host = t.host_endpoints_.size() > 1;
  std::vector<std::vector<double>> dist;
  if (choose_nic || choose_host) {
    dist.resize(static_cast<size_t>(type.devices));
    for (int i = 0; i < type.devices; ++i) {
      t.cache_->Put(i, std::make_unique<const std::vector<int>>(t.Tree(i, &dist[static_cast<size_t>(i)])));
    }
  }
  auto nearest = [&](int device, const std::vector<int>& targets) {
    if (targets.size() == 1) return from0[static_cast<size_t>(targets[0])] >= 0 ? 0 : -1;
    double best = std::numeric_limits<double>::infinity();
    int pick = -1;
    for (size_t k = 0; k < targets.size(); ++k) {
      const double dd = dist[static_cast<size_t>(device)][static_cast<size_t>(targets[k])];
      if (dd < best) {  // strict: ties go to the lowest-numbered
        best = dd;
        pick = static_cast<int>(k);
      }
    }
    return pick;
  };
  t.nearest_host_.assign(static_cast<size_t>(type.devices), -1);
  if (!t.host_endpoints_.empty()) {
    for (int i = 0; i < type.devices; ++i) t.nearest_host_[static_cast<size_t>(i)] = nearest(i, t.host_endpoints_);
  }
  t.nic_of_device_.assign(static_cast<size_t>(type.devices), -1);
  if (!type.nic_of.empty()) {
    if (type.nic_of.size() != static_cast<size_t>(type.devices)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": nic_of lists ", type.nic_of.size(), " NICs for ",
                                                     type.devices, " devices"));
    }
    for (int i = 0; i < type.devices; ++i) {
      // "nic0+nic1": the device's NICs, rail 0 first.
      const std::vector<std::string> names = absl::StrSplit(type.nic_of[static_cast<size_t>(i)], '+');
      if (names.size() > static_cast<size_t>(kMaxNicRails)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": nic_of[", i, "] lists ", names.size(),
                                                       " NICs; at most ", kMaxNicRails, " rails"));
      }
      for (size_t r = 0; r < names.size(); ++r) {
        auto it = index.find(names[r]);
        if (it == index.end() || it->second < t.first_nic_) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": nic_of[", i, "] names '", names[r],
                                                         "', which is not one of its nics"));
        }
        if (r == 0) {
          t.nic_of_device_[static_cast<size_t>(i)] = it->second;
          continue;
        }
        if (t.other_rails_.size() < r) t.other_rails_.resize(r, std::vector<int>(static_cast<size_t>(type.devices), -1));
        t.other_rails_[r - 1][static_cast<size_t>(i)] = it->second;
      }
    }
  } else if (t.num_nics_ > 0) {
    std::vector<int> nics;
    for (int k = 0; k < t.num_nics_; ++k) nics.push_back(t.first_nic_ + k);
    for (int i = 0; i < type.devices; ++i) {
      const int k = nearest(i, nics);
      t.nic_of_device_[static_cast<size_t>(i)] = k < 0 ? -1 : nics[static_cast<size_t>(k)];
    }
  }
  if (all_pairs) {
    // Every route up front, stored pair by pair, each from its own source's tree (no shortcut
    // through a neighbour): the previous form, kept as the reference the lazy one is checked on.
    auto all = std::make_shared<std::vector<std::vector<std::vector<int>>>>(n, std::vector<std::vector<int>>(n));
    for (size_t src = 0; src < n; ++src) {
      const std::vector<int> via = t.Tree(static_cast<int>(src), nullptr);
      for (size_t dst = 0; dst < n; ++dst) {
        if (src == dst) continue;
        std::vector<int>& path = (*all)[src][dst];
        for (int v = static_cast<int>(dst); v != static_cast<int>(src); v = t.link_from_[static_cast<size_t>(via[static_cast<size_t>(v)])]) {
          if (via[static_cast<size_t>(v)] < 0) {
            path.clear();
            break;
          }
          path.push_back(via[static_cast<size_t>(v)]);
        }
        std::reverse(path.begin(), path.end());
      }
    }
    t.all_ = std::move(all);
  }
  return t;
}

}  // namespace testbed::internal
