// Incremental rate updates (RateUpdates::kIncremental) give the same simulation as
// recomputing every affected transfer's rate over all its links (kFull), bit for bit: on
// random mixes of point-to-point transfers and ring collectives over a cluster whose nodes
// share one NIC each (so transfers of every size contend), every task starts and ends at the
// same double, and every link carries the same bytes for the same busy time. And the shared
// bandwidth itself: transfers through one NIC split it evenly (closed form).
#include <random>

#include <gtest/gtest.h>

#include "sim_fixtures.h"
#include "traffic_sim.h"

namespace testbed::testing {
namespace {

constexpr double kBw = 100e9, kLat = 1e-6;

// Transfers and collectives in one global order: each joins its devices' streams in that
// order, so the heads of the streams can always make progress (no deadlock).
Schedule RandomTraffic(const Cluster& cluster, unsigned seed, int count) {
  std::mt19937 rng(seed);
  const int n = cluster.num_devices();
  std::uniform_int_distribution<int> device(0, n - 1), kind(0, 3), log_bytes(10, 28);
  Schedule s(n);
  for (int k = 0; k < count; ++k) {
    const std::int64_t bytes = std::int64_t{1} << log_bytes(rng);
    if (kind(rng) == 0) {  // a collective over a random group of 2..n members
      std::vector<DeviceId> members;
      for (DeviceId d = 0; d < n; ++d) {
        if (rng() % 3 == 0) members.push_back(d);
      }
      if (members.size() < 2) members = {0, static_cast<DeviceId>(n - 1)};
      Task t;
      t.kind = TaskKind::kCollective;
      t.stream = streams::kDataComm;
      t.op = rng() % 2 == 0 ? CollectiveOp::kAllReduce : CollectiveOp::kAllGather;
      t.group = s.Group(members);
      t.bytes = bytes;
      s.Add(t);
      continue;
    }
    const DeviceId a = device(rng);
    DeviceId b = device(rng);
    if (b == a) b = (a + 1) % n;
    AddTransfer(s, a, b, bytes, streams::kDataComm);
  }
  return s;
}

TEST(LinkSharing, IncrementalRatesEqualFullRecomputeBitForBit) {
  // 16 nodes of 8: a collective over a third of the devices holds more links than
  // LinkSharing::kTreeLinks, so min-trees are exercised too.
  const Cluster cluster = StarCluster(8, kBw, kLat, 80, 16);
  for (unsigned seed = 1; seed <= 6; ++seed) {
    const Schedule s = RandomTraffic(cluster, seed, 400);
    ASSERT_TRUE(s.Check().ok()) << s.Check();
    const SimResult inc = SimulateTraffic(s, cluster, RateUpdates::kIncremental);
    const SimResult full = SimulateTraffic(s, cluster, RateUpdates::kFull);
    ASSERT_EQ(inc.tasks, static_cast<std::int64_t>(s.size()));
    EXPECT_EQ(inc.iteration_time_s, full.iteration_time_s) << "seed " << seed;
    EXPECT_EQ(inc.task_start_s, full.task_start_s) << "seed " << seed;
    EXPECT_EQ(inc.task_end_s, full.task_end_s) << "seed " << seed;
    ASSERT_EQ(inc.links.size(), full.links.size());
    for (size_t l = 0; l < inc.links.size(); ++l) {
      EXPECT_EQ(inc.links[l].bytes, full.links[l].bytes) << "seed " << seed << " link " << l;
      EXPECT_EQ(inc.links[l].busy_s, full.links[l].busy_s) << "seed " << seed << " link " << l;
    }
  }
}

// k equal transfers from k devices of node 0 to k devices of node 1 start together and all
// cross node 0's NIC link (and node 1's): each gets 1/k of it, so all end at
// latency + k S / B, in both modes.
TEST(LinkSharing, TransfersThroughOneNicShareItEvenly) {
  const Cluster cluster = StarCluster(4, kBw, kLat, 80, 2);
  const std::int64_t bytes = 1 << 26;
  for (int k = 1; k <= 4; ++k) {
    Schedule s(cluster.num_devices());
    for (int i = 0; i < k; ++i) {
      Task send;
      send.kind = TaskKind::kSend;
      send.stream = streams::kPipelineComm;
      send.device = i;
      send.peer = 4 + i;
      send.bytes = bytes;
      const TaskId st = s.Add(send);
      Task recv = send;
      recv.kind = TaskKind::kRecv;
      recv.stream = streams::kPipelineRecv;
      recv.device = 4 + i;
      recv.peer = i;
      s.Link(s.Add(recv), st);
    }
    const double latency = cluster.PathLatency(0, 4);
    for (RateUpdates mode : {RateUpdates::kIncremental, RateUpdates::kFull}) {
      const SimResult r = SimulateTraffic(s, cluster, mode);
      EXPECT_NEAR(r.iteration_time_s, latency + k * static_cast<double>(bytes) / kBw, 1e-15) << "k = " << k;
    }
  }
}

}  // namespace
}  // namespace testbed::testing
