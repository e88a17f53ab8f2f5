// Private links (sim/private_links.h): a link is private exactly when one (device, stream)
// order holds every transfer crossing it, and a transfer over private links only ends at its
// closed-form time and leaves the same link statistics as through the sharing bookkeeping.
// (That the whole engine gives the same doubles with and without the shortcut is checked on
// random traffic in link_sharing_test.cc and on real experiments in
// tests/e2e/sim_regression_test.cc: RateUpdates::kFull never takes it.)
#include "sim/private_links.h"

#include <random>

#include <gtest/gtest.h>

#include "ring.h"
#include "sim_fixtures.h"
#include "traffic_sim.h"

namespace testbed::testing {
namespace {

constexpr double kBw = 100e9, kLat = 1e-6;

Task Collective(Schedule& s, const std::vector<DeviceId>& members, std::int64_t bytes, std::uint8_t stream) {
  Task t;
  t.kind = TaskKind::kCollective;
  t.stream = stream;
  t.op = CollectiveOp::kAllReduce;
  t.group = s.Group(members);
  t.bytes = bytes;
  return t;
}

// Each task's plan from the ring model; receives (and tasks without one) get none.
struct Plans {
  std::vector<CommPlan> storage;
  std::vector<const CommPlan*> comm;
  Plans(const Schedule& s, const Cluster& cluster) {
    const collectives::Ring ring(collectives::CommTuning{});
    storage.reserve(s.size());
    for (TaskId t = 0; t < static_cast<TaskId>(s.size()); ++t) {
      const Task& task = s.task(t);
      if (task.kind == TaskKind::kCollective) {
        storage.push_back(*ring.PlanCollective(task.op, s.groups()[static_cast<size_t>(task.group)], task.bytes, cluster));
      } else if (task.kind == TaskKind::kSend) {
        storage.push_back(*ring.PlanTransfer(task.device, task.peer, task.bytes, cluster));
      } else {
        comm.push_back(nullptr);
        continue;
      }
      comm.push_back(&storage.back());
    }
  }
};

// As the simulator finds them: every collective on its stream, every send with its receive's.
std::vector<char> Find(const Schedule& s, const Cluster& cluster) {
  const Plans plans(s, cluster);
  sim::PrivateLinks finder(cluster.links().size());
  for (TaskId t = 0; t < static_cast<TaskId>(s.size()); ++t) {
    const Task& task = s.task(t);
    if (task.kind == TaskKind::kCollective) finder.Add(*plans.comm[static_cast<size_t>(t)], task.stream, s.DevicesOf(t));
    if (task.kind == TaskKind::kRecv) {
      finder.Add(*plans.comm[static_cast<size_t>(task.match)], s.task(task.match).stream, s.DevicesOf(task.match),
                 task.stream, s.DevicesOf(t));
    }
  }
  return finder.Take();
}

// One node of four devices on a switch. Devices 0 and 1 all-reduce twice on their
// tensor-parallel stream; 0 also sends to 2, and 2 to 3, on the pipeline streams.
TEST(PrivateLinks, ALinkIsPrivateWhenOneStreamOfOneDeviceHoldsEverythingOnIt) {
  const Cluster cluster = StarCluster(4, kBw, kLat);
  Schedule s(4);
  s.Add(Collective(s, {0, 1}, 1 << 20, streams::kTensorComm));
  s.Add(Collective(s, {0, 1}, 1 << 22, streams::kTensorComm));
  AddTransfer(s, 0, 2, 1 << 20, streams::kPipelineComm);
  AddTransfer(s, 2, 3, 1 << 20, streams::kPipelineComm);
  const std::vector<char> priv = Find(s, cluster);
  ASSERT_EQ(priv.size(), cluster.links().size());
  const auto up = [&](DeviceId d) { return static_cast<size_t>(cluster.Route(d, (d + 1) % 4).front()); };
  const auto down = [&](DeviceId d) { return static_cast<size_t>(cluster.Route((d + 1) % 4, d).back()); };
  EXPECT_EQ(priv[up(1)], 1);    // the all-reduces only
  EXPECT_EQ(priv[down(1)], 1);
  EXPECT_EQ(priv[down(0)], 1);  // the all-reduces only: 0 sends, it receives nothing else
  EXPECT_EQ(priv[up(0)], 0);    // the all-reduces (tensor stream) and the send to 2 (pipeline stream)
  EXPECT_EQ(priv[up(2)], 1);    // the send to 3 only
  EXPECT_EQ(priv[down(2)], 1);  // the send from 0 only
  EXPECT_EQ(priv[down(3)], 1);
  EXPECT_EQ(priv[up(3)], 0);    // nothing crosses it
}

// The same device on two streams is two orders: its link is shared between them.
TEST(PrivateLinks, TwoStreamsOfOneDeviceShareItsLinks) {
  const Cluster cluster = StarCluster(2, kBw, kLat);
  Schedule s(2);
  AddTransfer(s, 0, 1, 1 << 20, streams::kPipelineComm);
  AddTransfer(s, 0, 1, 1 << 20, streams::kDataComm);
  const std::vector<char> priv = Find(s, cluster);
  for (LinkId l : cluster.Route(0, 1)) EXPECT_EQ(priv[static_cast<size_t>(l)], 0) << "link " << l;
}

// A collective over more members than the analysis looks at keeps its links shared (safe).
TEST(PrivateLinks, ACollectiveOverManyDevicesKeepsItsLinksShared) {
  const Cluster cluster = StarCluster(80, kBw, kLat);
  Schedule s(80);
  std::vector<DeviceId> all(80);
  for (DeviceId d = 0; d < 80; ++d) all[static_cast<size_t>(d)] = d;
  s.Add(Collective(s, all, 1 << 20, streams::kDataComm));
  const std::vector<char> priv = Find(s, cluster);
  for (char p : priv) EXPECT_EQ(p, 0);
}

// An all-reduce over devices 0 and 1 and a send from 2 to 3, each alone on its private links,
// end at their plans' isolated times (the sum over phases of latency + bytes / bandwidth; for
// the send 2 L + S / B); each link carries the same bytes for the same busy time in both rate
// modes (kFull moves them through the sharing bookkeeping).
TEST(PrivateLinks, ATransferAloneOnPrivateLinksEndsAtItsClosedFormTime) {
  const Cluster cluster = StarCluster(4, kBw, kLat);
  Schedule s(4);
  const std::int64_t bytes = 1 << 24;
  s.Add(Collective(s, {0, 1}, bytes, streams::kTensorComm));
  AddTransfer(s, 2, 3, bytes, streams::kPipelineComm);
  const SimResult inc = SimulateTraffic(s, cluster, RateUpdates::kIncremental);
  const SimResult full = SimulateTraffic(s, cluster, RateUpdates::kFull);
  const Plans plans(s, cluster);
  EXPECT_DOUBLE_EQ(inc.task_end_s[0], plans.comm[0]->IsolatedTime(cluster));
  EXPECT_DOUBLE_EQ(inc.task_end_s[1], plans.comm[1]->IsolatedTime(cluster));
  EXPECT_DOUBLE_EQ(inc.task_end_s[1], cluster.PathLatency(2, 3) + static_cast<double>(bytes) / kBw);
  EXPECT_EQ(inc.task_end_s, full.task_end_s);
  for (size_t l = 0; l < inc.links.size(); ++l) {
    EXPECT_EQ(inc.links[l].bytes, full.links[l].bytes) << "link " << l;
    EXPECT_EQ(inc.links[l].busy_s, full.links[l].busy_s) << "link " << l;
  }
  EXPECT_GT(inc.links[static_cast<size_t>(cluster.Route(2, 3).front())].busy_s, 0);
}

// Runs of transfers on private links one after another (the engine times each when it starts,
// without the sharing bookkeeping: LinkSharing::PrivateTransferTime), beside transfers of
// several priorities contending for a shared link: every task and every link gives the same
// doubles in both rate modes, and each private run ends at the sum of its isolated times.
// All-gathers over {0, 1} (one phase each) on the tensor stream, sends 2 -> 3 on the pipeline
// stream, and sends 4 -> 5 on the data streams and 6 -> 5 on the pipeline streams (two
// streams of 5: they share its link).
TEST(PrivateLinks, RunsOfPrivateTransfersBesideSharedOnesMatchTheSharingBookkeeping) {
  const Cluster cluster = StarCluster(7, kBw, kLat);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> log_bytes(12, 26), priority(0, 2), which(0, 3);
  Schedule s(7);
  std::vector<TaskId> gathers, sends;
  for (int k = 0; k < 60; ++k) {
    const std::int64_t bytes = std::int64_t{1} << log_bytes(rng);
    const auto p = static_cast<std::uint8_t>(priority(rng));
    switch (which(rng)) {
      case 0: {
        Task t = Collective(s, {0, 1}, bytes, streams::kTensorComm);
        t.op = CollectiveOp::kAllGather;
        t.priority = p;
        gathers.push_back(s.Add(t));
        break;
      }
      case 1:
        sends.push_back(AddTransfer(s, 2, 3, bytes, streams::kPipelineComm, p));
        break;
      case 2:
        AddTransfer(s, 4, 5, bytes, streams::kDataComm, p);
        break;
      default:
        AddTransfer(s, 6, 5, bytes, streams::kPipelineComm, p);
        break;
    }
  }
  ASSERT_TRUE(s.Check().ok()) << s.Check();
  const std::vector<char> private_links = Find(s, cluster);
  for (DeviceId d : {0, 1, 2, 3}) {
    for (LinkId l : cluster.Route(d, d == 0 ? 1 : d == 1 ? 0 : d == 2 ? 3 : 2)) {
      if (d == 3) continue;  // 3 -> 2 carries nothing
      EXPECT_TRUE(private_links[static_cast<size_t>(l)]) << "device " << d << " link " << l;
    }
  }
  EXPECT_FALSE(private_links[static_cast<size_t>(cluster.Route(4, 5).back())]);
  const SimResult inc = SimulateTraffic(s, cluster, RateUpdates::kIncremental);
  const SimResult full = SimulateTraffic(s, cluster, RateUpdates::kFull);
  ASSERT_EQ(inc.tasks, static_cast<std::int64_t>(s.size()));
  EXPECT_EQ(inc.task_start_s, full.task_start_s);
  EXPECT_EQ(inc.task_end_s, full.task_end_s);
  for (size_t l = 0; l < inc.links.size(); ++l) {
    EXPECT_EQ(inc.links[l].bytes, full.links[l].bytes) << "link " << l;
    EXPECT_EQ(inc.links[l].busy_s, full.links[l].busy_s) << "link " << l;
  }
  const Plans plans(s, cluster);
  for (const std::vector<TaskId>* run : {&gathers, &sends}) {
    ASSERT_GT(run->size(), 5u);
    double end = 0;
    for (TaskId t : *run) end += plans.comm[static_cast<size_t>(t)]->IsolatedTime(cluster);
    EXPECT_NEAR(inc.task_end_s[static_cast<size_t>(run->back())], end, 1e-12 * end);
  }
}

}  // namespace
}  // namespace testbed::testing
