// Routes found lazily per source equal the all-pairs routes they replaced, on every cluster
// preset; network tiers (leaf/spine/core, rails) route through the switches worked out by
// hand; a cluster too large for the memory it may use is refused before it is built.
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "config/cluster_config.h"
#include "config/preset_library.h"
#include "node_topology.h"

namespace testbed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const PresetLibrary& Library() {
  static const PresetLibrary lib({std::filesystem::path(TESTBED_TEST_CONFIG_DIR)});
  return lib;
}

absl::StatusOr<std::shared_ptr<const Cluster>> ClusterOf(const std::string& toml) {
  auto doc = ConfigDoc::ParseString(toml, "test.toml");
  if (!doc.ok()) return doc.status();
  ErrorList errors;
  auto cluster = ResolveCluster(*doc, {"cluster"}, Library(), errors);
  if (!errors.empty()) return errors.ToStatus();
  return cluster;
}

std::vector<std::string> Names(const Cluster& c, const std::vector<LinkId>& route) {
  std::vector<std::string> out;
  for (LinkId l : route) out.push_back(c.links()[static_cast<size_t>(l)].name);
  return out;
}

TEST(NetworkTest, LazyRoutesEqualAllPairsRoutesOnEveryPreset) {
  for (const std::string& name : Library().Names("clusters")) {
    auto lazy = ClusterOf(absl::StrCat("[cluster]\npreset = \"", name, "\"\nnodes = 2\n"));
    auto all = ClusterOf(absl::StrCat("[cluster]\npreset = \"", name, "\"\nnodes = 2\nroutes = \"all_pairs\"\n"));
    ASSERT_TRUE(lazy.ok()) << name << ": " << lazy.status();
    ASSERT_TRUE(all.ok()) << name << ": " << all.status();
    const Cluster& a = **lazy;
    const Cluster& b = **all;
    ASSERT_EQ(a.num_devices(), b.num_devices()) << name;
    ASSERT_EQ(a.links().size(), b.links().size()) << name;
    // Ask in a scrambled order so that the lazy trees are built in another order than 0..n.
    const int n = a.num_devices();
    std::vector<LinkId> reused{-1};  // RouteInto clears what a previous route left
    for (int i = 0; i < n; ++i) {
      const DeviceId s = (i * 7 + 3) % n;
      for (DeviceId d = 0; d < n; ++d) {
        const std::vector<LinkId> route = b.Route(s, d);
        EXPECT_EQ(a.Route(s, d), route) << name << " " << s << "->" << d;
        a.RouteInto(s, d, reused);
        EXPECT_EQ(reused, route) << name << " " << s << "->" << d;
        double latency = 0;
        for (LinkId l : route) latency += a.links()[static_cast<size_t>(l)].spec.latency_s;
        EXPECT_EQ(a.PathLatency(s, d), latency) << name << " " << s << "->" << d;
      }
      EXPECT_EQ(a.NearestHost(s), b.NearestHost(s)) << name << " device " << s;
      for (int h = -1; h < a.NumHosts(a.device(s).node); ++h) {
        for (bool to_device : {false, true}) {
          auto ra = a.HostRoute(s, h, to_device);
          auto rb = b.HostRoute(s, h, to_device);
          ASSERT_TRUE(ra.ok() && rb.ok()) << name;
          EXPECT_EQ(*ra, *rb) << name << " device " << s << " host " << h;
        }
      }
    }
  }
}

// The routing weight (node_topology.cc): the time to move 1 MiB over a link.
double Weight(const LinkSpec& s) { return s.latency_s + 1048576.0 / s.bandwidth_bytes_per_s; }

TEST(NetworkTest, RoutesAreShortestPathsByFloydWarshall) {
  for (const std::string& name : Library().Names("clusters")) {
    auto c = ClusterOf(absl::StrCat("[cluster]\npreset = \"", name, "\"\n"));
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    for (const NodeGroup& g : (*c)->groups()) {
      auto topo = internal::NodeTopology::Build(g.type, false);
      ASSERT_TRUE(topo.ok()) << name << ": " << topo.status();
      const int n = g.type.devices + static_cast<int>(g.type.hubs.size() + g.type.nics.size());
      const double inf = std::numeric_limits<double>::infinity();
      std::vector<std::vector<double>> d(n, std::vector<double>(n, inf));
      for (int i = 0; i < n; ++i) d[i][i] = 0;
      for (int l = 0; l < topo->num_local_links(); ++l) {
        double& e = d[topo->link_from(l)][topo->link_to(l)];
        e = std::min(e, Weight(topo->link_spec(l)));
      }
      for (int k = 0; k < n; ++k)
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) d[i][j] = std::min(d[i][j], d[i][k] + d[k][j]);
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          const std::vector<int> route = topo->Route(i, j);
          if (i == j || d[i][j] == inf) {
            EXPECT_TRUE(route.empty()) << name << " " << i << "->" << j;
            continue;
          }
          ASSERT_FALSE(route.empty()) << name << " " << topo->endpoint(i) << "->" << topo->endpoint(j);
          double w = 0;
          int at = i;
          for (int l : route) {
            EXPECT_EQ(topo->link_from(l), at) << name << ": route " << i << "->" << j << " is not a chain";
            at = topo->link_to(l);
            w += Weight(topo->link_spec(l));
          }
          EXPECT_EQ(at, j) << name;
          EXPECT_NEAR(w, d[i][j], 1e-12 * d[i][j]) << name << " " << topo->endpoint(i) << "->" << topo->endpoint(j);
        }
      }
    }
  }
}

TEST(NetworkTest, DevicesBehindOneSwitchRouteThroughIt) {
  // 4,096 devices on one switch (device_links): two hops between any two, found without a
  // tree per device.
  auto c = ClusterOf(R"([cluster]
name = "star"
[cluster.node]
name = "star"
device = "h100-sxm"
devices = 4096
hubs = ["switch"]
device_links = ["switch", "port"]
[cluster.node.link_types]
port = { bandwidth_gb_per_s = 400.0, latency_us = 0.936 }
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const Cluster& cl = **c;
  for (DeviceId a : {0, 17, 4095}) {
    for (DeviceId b : {1, 2048, 4094}) {
      EXPECT_THAT(Names(cl, cl.Route(a, b)), ElementsAre(absl::StrCat("n0.gpu", a, ">switch"),
                                                         absl::StrCat("n0.switch>gpu", b)));
    }
  }
  EXPECT_NEAR(cl.PathLatency(5, 6), 2 * 0.936e-6, 1e-15);
}

TEST(NetworkTest, CopiesOfAClusterShareItsRoutes) {
  auto c = ClusterOf("[cluster]\npreset = \"dgx-h100\"\nnodes = 2\n");
  ASSERT_TRUE(c.ok()) << c.status();
  const Cluster copy = **c;  // copied before any route was asked for
  EXPECT_EQ(copy.Route(0, 9), (*c)->Route(0, 9));
  EXPECT_EQ(Names(copy, copy.Route(3, 12)), Names(**c, (*c)->Route(3, 12)));
}

// 8 one-GPU nodes: leaves of 2 nodes, spines of 2 leaves, a core over the spines.
constexpr char kTiers[] = R"([cluster]
name = "tiers"
nodes = 8
[cluster.node]
name = "one"
device = "h100-sxm"
devices = 1
hubs = ["pcisw"]
nics = ["nic0"]
nic_link = "ib"
links = [["gpu0", "pcisw", "pcie"], ["nic0", "pcisw", "pcie"]]
[cluster.node.link_types]
pcie = { bandwidth_gb_per_s = 60.0, latency_us = 1.0 }
ib = { bandwidth_gb_per_s = 50.0, latency_us = 2.0 }
[cluster.network]
tiers = [
  { name = "leaf", fan_in = 2, uplink_gb_per_s = 40.0, uplink_latency_us = 0.5 },
  { name = "spine", fan_in = 2, uplink_gb_per_s = 30.0, uplink_latency_us = 0.25 },
  { name = "core" },
]
)";

TEST(NetworkTest, TransfersClimbToTheLowestSharedSwitch) {
  auto c = ClusterOf(kTiers);
  ASSERT_TRUE(c.ok()) << c.status();
  const Cluster& cl = **c;
  ASSERT_EQ(cl.num_devices(), 8);
  // Same leaf: no tier link.
  EXPECT_THAT(Names(cl, cl.Route(0, 1)),
              ElementsAre("n0.gpu0>pcisw", "n0.pcisw>nic0", "n0.nic0>fabric", "fabric>n1.nic0", "n1.nic0>pcisw",
                          "n1.pcisw>gpu0"));
  // Leaves 0 and 1 share spine 0.
  EXPECT_THAT(Names(cl, cl.Route(0, 2)),
              ElementsAre("n0.gpu0>pcisw", "n0.pcisw>nic0", "n0.nic0>fabric", "leaf0>spine", "spine>leaf1",
                          "fabric>n2.nic0", "n2.nic0>pcisw", "n2.pcisw>gpu0"));
  // Node 5 is on leaf 2 under spine 1: up to the core and down.
  EXPECT_THAT(Names(cl, cl.Route(1, 5)),
              ElementsAre("n1.gpu0>pcisw", "n1.pcisw>nic0", "n1.nic0>fabric", "leaf0>spine", "spine0>core",
                          "core>spine1", "spine>leaf2", "fabric>n5.nic0", "n5.nic0>pcisw", "n5.pcisw>gpu0"));
  // Latency: 2 x pcie + 2 x ib + 2 x leaf uplink + 2 x spine uplink.
  EXPECT_NEAR(cl.PathLatency(1, 5), (2 * 1.0 + 2 * 1.0 + 2 * 2.0 + 2 * 0.5 + 2 * 0.25) * 1e-6, 1e-15);
  EXPECT_DOUBLE_EQ(cl.PathBandwidth(1, 5), 30e9);
  EXPECT_DOUBLE_EQ(cl.PathBandwidth(0, 2), 40e9);
  EXPECT_DOUBLE_EQ(cl.PathBandwidth(0, 1), 50e9);
  // 8 nodes: 4 leaves and 2 spines, an up and a down link each; the core has none.
  int tier_links = 0;
  for (const Link& l : cl.links()) tier_links += l.node < 0 ? 1 : 0;
  EXPECT_EQ(tier_links, 2 * 4 + 2 * 2);
}

TEST(NetworkTest, RailsKeepEachNicOnItsOwnLeaves) {
  // 4 nodes of 2 GPUs, GPU i on NIC i; leaves of 2 nodes per rail, one spine tier above.
  auto c = ClusterOf(R"([cluster]
name = "rails"
nodes = 4
[cluster.node]
name = "two"
device = "h100-sxm"
devices = 2
hubs = ["sw"]
nics = ["nic0", "nic1"]
nic_of = ["nic0", "nic1"]
nic_link = "ib"
links = [["gpu0", "sw", "nvl"], ["gpu1", "sw", "nvl"], ["nic0", "sw", "nvl"], ["nic1", "sw", "nvl"]]
[cluster.node.link_types]
nvl = { bandwidth_gb_per_s = 400.0 }
ib = { bandwidth_gb_per_s = 50.0 }
[cluster.network]
rails = true
tiers = [{ name = "leaf", fan_in = 2, uplink_gb_per_s = 100.0 }, { name = "spine" }]
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const Cluster& cl = **c;
  // gpu0 of node 0 to gpu0 of node 1: one rail-0 leaf.
  EXPECT_THAT(Names(cl, cl.Route(0, 2)),
              ElementsAre("n0.gpu0>sw", "n0.sw>nic0", "n0.nic0>fabric", "fabric>n1.nic0", "n1.nic0>sw", "n1.sw>gpu0"));
  // gpu1 of node 0 to gpu1 of node 1: the rail-1 leaf (leaf2: rail 1's first).
  EXPECT_THAT(Names(cl, cl.Route(1, 3)),
              ElementsAre("n0.gpu1>sw", "n0.sw>nic1", "n0.nic1>fabric", "fabric>n1.nic1", "n1.nic1>sw", "n1.sw>gpu1"));
  // Across rails (gpu0 of node 0 to gpu1 of node 1): rail-0 leaf up, rail-1 leaf down.
  EXPECT_THAT(Names(cl, cl.Route(0, 3)),
              ElementsAre("n0.gpu0>sw", "n0.sw>nic0", "n0.nic0>fabric", "leaf0>spine", "spine>leaf2", "fabric>n1.nic1",
                          "n1.nic1>sw", "n1.sw>gpu1"));
  // Same rail, other leaf: node 0 and node 2 (leaf 0 and leaf 1 of rail 0).
  EXPECT_THAT(Names(cl, cl.Route(0, 4)),
              ElementsAre("n0.gpu0>sw", "n0.sw>nic0", "n0.nic0>fabric", "leaf0>spine", "spine>leaf1", "fabric>n2.nic0",
                          "n2.nic0>sw", "n2.sw>gpu0"));
}

TEST(NetworkTest, TheSuperpodPresetIsNonBlockingWithinARail) {
  auto c = ClusterOf("[cluster]\npreset = \"h100-superpod\"\nnodes = 64\n");
  ASSERT_TRUE(c.ok()) << c.status();
  const Cluster& cl = **c;
  EXPECT_EQ(cl.num_devices(), 512);
  // GPU 3 of node 0 and of node 40 (other scalable unit): rail 3, leaves 0 and 1 of that rail.
  const auto names = Names(cl, cl.Route(3, 40 * 8 + 3));
  // 64 nodes make 2 leaves per rail, so rail 3 has leaves 6 and 7, both under spine 0.
  EXPECT_THAT(names, ::testing::Contains("leaf6>spine"));
  EXPECT_THAT(names, ::testing::Contains("spine>leaf7"));
  EXPECT_DOUBLE_EQ(cl.PathBandwidth(3, 40 * 8 + 3), 50e9);  // the NIC port, not the uplink
}

TEST(NetworkTest, NetworkErrorsNameTheKey) {
  auto no_uplink = ClusterOf(R"([cluster]
preset = "dgx-h100"
nodes = 4
[cluster.network]
tiers = [{ name = "leaf", fan_in = 2 }, { name = "spine" }]
)");
  ASSERT_FALSE(no_uplink.ok());
  EXPECT_THAT(std::string(no_uplink.status().message()),
              HasSubstr("test.toml:5:10: [cluster].network tier 0 ('leaf'): missing 'uplink_gb_per_s'"));
  auto typo = ClusterOf(R"([cluster]
preset = "dgx-h100"
nodes = 4
[cluster.network]
tiers = [{ name = "leaf", fan_inn = 2, uplink_gb_per_s = 1.0 }, { name = "spine" }]
)");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("fan_inn"));
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("fan_in"));
  auto no_tiers = ClusterOf("[cluster]\npreset = \"dgx-h100\"\nnodes = 4\n[cluster.network]\nrails = true\n");
  ASSERT_FALSE(no_tiers.ok());
  EXPECT_THAT(std::string(no_tiers.status().message()), HasSubstr("'tiers' must be a non-empty array"));
  auto zero_leaf = ClusterOf(R"([cluster]
preset = "dgx-h100"
nodes = 4
[cluster.network]
tiers = [{ name = "leaf", uplink_gb_per_s = 1.0 }, { name = "spine" }]
)");
  ASSERT_FALSE(zero_leaf.ok());
  EXPECT_THAT(std::string(zero_leaf.status().message()), HasSubstr("network tier 'leaf' groups 0 units"));
}

TEST(NetworkTest, AClusterTooLargeForItsMemoryIsRefusedBeforeItIsBuilt) {
  auto big = ClusterOf("[cluster]\npreset = \"dgx-h100\"\nnodes = 100000\nmemory_limit_gib = 0.01\n");
  ASSERT_FALSE(big.ok());
  const std::string msg(big.status().message());
  EXPECT_THAT(msg, HasSubstr("test.toml"));
  EXPECT_THAT(msg, HasSubstr("cluster 'dgx-h100' is too large"));
  EXPECT_THAT(msg, HasSubstr("0.01 GiB"));
  // The estimate grows with the nodes and covers what is built.
  std::vector<NodeGroup> groups = (*ClusterOf("[cluster]\npreset = \"dgx-h100\"\n"))->groups();
  const double one = Cluster::EstimateBytes(groups, ClusterOptions{});
  groups[0].count = 1000;
  EXPECT_NEAR(Cluster::EstimateBytes(groups, ClusterOptions{}), 1000 * one, one);
  auto fits = ClusterOf("[cluster]\npreset = \"dgx-h100\"\nnodes = 1000\nmemory_limit_gib = 1\n");
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ((*fits)->num_devices(), 8000);
}

}  // namespace
}  // namespace testbed
