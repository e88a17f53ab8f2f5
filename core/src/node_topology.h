// The inside of one node type: its endpoints (devices, hubs, NICs), directional links, and
// the shortest routes between endpoints. Routes are found per source endpoint on first use
// (one Dijkstra, kept as a tree of predecessors), so a node of thousands of devices behind one
// switch costs only the sources actually used, not every pair; `all_pairs` computes and stores
// every pair's route up front instead (the reference the lazy form is checked against).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/cluster.h"

namespace testbed::internal {

class NodeTopology {
 public:
  // Fails on an inconsistent description (unknown endpoint, no path between two devices, a
  // host or NIC that is not declared).
  [[nodiscard]] static absl::StatusOr<NodeTopology> Build(const NodeType& type, bool all_pairs);

  [[nodiscard]] int num_local_links() const noexcept { return static_cast<int>(link_spec_.size()); }
  [[nodiscard]] int num_nics() const noexcept { return num_nics_; }
  [[nodiscard]] int first_nic_endpoint() const noexcept { return first_nic_; }
  [[nodiscard]] const std::string& endpoint(int e) const { return endpoints_[static_cast<size_t>(e)]; }
  [[nodiscard]] int link_from(int l) const { return link_from_[static_cast<size_t>(l)]; }
  [[nodiscard]] int link_to(int l) const { return link_to_[static_cast<size_t>(l)]; }
  [[nodiscard]] const LinkSpec& link_spec(int l) const { return link_spec_[static_cast<size_t>(l)]; }
  // Endpoint index of device `d`'s NIC of `rail` (-1 if none: NodeType::nic_of), and of each
  // host (NodeType::hosts).
  [[nodiscard]] int nic_of_device(int d, int rail = 0) const {
    if (rail == 0) return nic_of_device_[static_cast<size_t>(d)];
    const size_t r = static_cast<size_t>(rail - 1);
    return r < other_rails_.size() ? other_rails_[r][static_cast<size_t>(d)] : -1;
  }
  [[nodiscard]] const std::vector<int>& host_endpoints() const noexcept { return host_endpoints_; }
  [[nodiscard]] int nearest_host(int d) const { return nearest_host_[static_cast<size_t>(d)]; }

  // The directional local links from endpoint `from` to `to`, in order (empty when equal).
  [[nodiscard]] std::vector<int> Route(int from, int to) const;
  // The same links, each plus `offset`, appended to `out` without a vector of their own;
  // false (and `out` as it was) when `to` is out of reach.
  [[nodiscard]] bool AppendRoute(int from, int to, std::int32_t offset, std::vector<std::int32_t>& out) const;
  // The shortest route that crosses only links of `kinds` (empty when there is none, or when
  // from == to). Found afresh on each call (views pinned to a link class are planned once per
  // collective and cached by their users).
  [[nodiscard]] std::vector<int> RouteOver(int from, int to, LinkKinds kinds) const;

 private:
  // Shortest-path tree from `src`: the link arriving at each endpoint (-1: src or unreachable).
  [[nodiscard]] std::vector<int> Tree(int src, std::vector<double>* dist, LinkKinds kinds = kAllLinkKinds) const;
  [[nodiscard]] const std::vector<int>& CachedTree(int src) const;

  std::vector<std::string> endpoints_;
  std::vector<int> link_from_, link_to_;
  std::vector<LinkSpec> link_spec_;
  std::vector<std::vector<int>> out_links_;
  std::vector<int> nic_of_device_, host_endpoints_, nearest_host_;
  // other_rails_[r - 1][d]: device d's NIC of rail r (-1 where it has fewer NICs).
  std::vector<std::vector<int>> other_rails_;
  int num_nics_ = 0, first_nic_ = 0, devices_ = 0;
  // Trees found so far, shared by copies of the cluster (the topology never changes). A slot
  // is read without the lock once set; setting it takes the lock, and a tree is never freed
  // before the cache.
  struct Cache {
    explicit Cache(size_t n) : slots(n), owned(n) {}
    std::mutex mu;
    std::vector<std::atomic<const std::vector<int>*>> slots;
    std::vector<std::unique_ptr<const std::vector<int>>> owned;
    void Put(int src, std::unique_ptr<const std::vector<int>> tree) {
      slots[static_cast<size_t>(src)].store(tree.get(), std::memory_order_release);
      owned[static_cast<size_t>(src)] = std::move(tree);
    }
  };
  std::shared_ptr<Cache> cache_;
  // all_pairs: routes[from][to], precomputed.
  std::shared_ptr<const std::vector<std::vector<std::vector<int>>>> all_;
};

}  // namespace testbed::internal
