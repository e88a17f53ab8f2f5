// Strict priority per link (Task::priority, TriRace's runtime): a link carries only its most
// urgent transfers, sharing its bandwidth among them; the others on it wait. Closed forms on
// one link, the even share of equal priorities unchanged, a transfer held back on one link
// and free on another, and incremental rate updates equal to the full recompute under random
// priorities, bit for bit.
#include <random>

#include <gtest/gtest.h>

#include "sim_fixtures.h"
#include "traffic_sim.h"

namespace testbed::testing {
namespace {

constexpr double kBw = 10e9;
constexpr double kBytes = 1e9;  // 0.1 s alone on a link

// A send from `a` to `b` of `bytes` on `stream` with `priority`, after `deps`.
TaskId Send(Schedule& s, DeviceId a, DeviceId b, double bytes, std::uint8_t stream, std::uint8_t priority,
            const std::vector<TaskId>& deps = {}) {
  return AddTransfer(s, a, b, static_cast<std::int64_t>(bytes), stream, priority, deps);
}

TEST(LinkPriority, EqualPrioritiesShareTheLinkEvenly) {
  const Cluster cluster = StarCluster(2, kBw, 0);
  Schedule s(2);
  const TaskId a = Send(s, 0, 1, kBytes, streams::kPipelineComm, 0);
  const TaskId b = Send(s, 0, 1, kBytes, streams::kDataComm, 0);
  const SimResult r = SimulateTraffic(s, cluster);
  EXPECT_DOUBLE_EQ(r.task_end_s[static_cast<size_t>(a)], 2 * kBytes / kBw);
  EXPECT_DOUBLE_EQ(r.task_end_s[static_cast<size_t>(b)], 2 * kBytes / kBw);
}

TEST(LinkPriority, TheMoreUrgentTransferTakesTheLinkAndTheOtherWaits) {
  const Cluster cluster = StarCluster(2, kBw, 0);
  Schedule s(2);
  const TaskId low = Send(s, 0, 1, kBytes, streams::kDataComm, 1);
  const TaskId high = Send(s, 0, 1, kBytes, streams::kPipelineComm, 3);
  const SimResult r = SimulateTraffic(s, cluster);
  EXPECT_DOUBLE_EQ(r.task_end_s[static_cast<size_t>(high)], kBytes / kBw);
  EXPECT_DOUBLE_EQ(r.task_end_s[static_cast<size_t>(low)], 2 * kBytes / kBw);
}

TEST(LinkPriority, AnUrgentTransferArrivingLaterPausesTheOther) {
  // The low-priority transfer runs alone for 0.05 s (half its bytes), waits while the urgent
  // one moves its bytes, then finishes its half: at 0.05 + 0.1 + 0.05 s.
  const Cluster cluster = StarCluster(3, kBw, 0);
  Schedule s(3);
  const TaskId low = Send(s, 0, 1, kBytes, streams::kDataComm, 1);
  // The urgent transfer waits for a send elsewhere (2 -> 0 on other links) of 0.05 s.
  const TaskId before = Send(s, 2, 0, kBytes / 2, streams::kTensorComm, 0);
  const TaskId high = Send(s, 0, 1, kBytes, streams::kPipelineComm, 3, {before});
  const SimResult r = SimulateTraffic(s, cluster);
  EXPECT_DOUBLE_EQ(r.task_end_s[static_cast<size_t>(before)], 0.05);
  EXPECT_DOUBLE_EQ(r.task_start_s[static_cast<size_t>(high)], 0.05);
  EXPECT_DOUBLE_EQ(r.task_end_s[static_cast<size_t>(high)], 0.15);
  EXPECT_NEAR(r.task_end_s[static_cast<size_t>(low)], 0.2, 1e-12);
}

TEST(LinkPriority, ATransferHeldBackOnOneLinkKeepsItsShareOfTheOthers) {
  // 0 -> 2 (low) and 1 -> 2 (high) meet on the link into device 2, where the low one waits; a
  // third transfer 0 -> 1 (low) shares 0's uplink with the waiting one. As without priorities,
  // a link is split evenly among its holders of the top class whatever holds them back
  // elsewhere (the flow model is not max-min fair), so 0 -> 1 moves at half the link's rate
  // until 0.2 s; the held transfer moves at half rate from 0.1 s (the urgent one done) to
  // 0.2 s and alone after: 0.5 GB more at full rate, done at 0.25 s.
  const Cluster cluster = StarCluster(3, kBw, 0);
  Schedule s(3);
  const TaskId low = Send(s, 0, 2, kBytes, streams::kDataComm, 1);
  const TaskId high = Send(s, 1, 2, kBytes, streams::kPipelineComm, 3);
  const TaskId other = Send(s, 0, 1, kBytes, streams::kTensorComm, 1);
  const SimResult r = SimulateTraffic(s, cluster);
  EXPECT_DOUBLE_EQ(r.task_end_s[static_cast<size_t>(high)], 0.1);
  EXPECT_DOUBLE_EQ(r.task_end_s[static_cast<size_t>(other)], 0.2);
  EXPECT_NEAR(r.task_end_s[static_cast<size_t>(low)], 0.25, 1e-12);
}

TEST(LinkPriority, IncrementalRatesEqualFullRecomputeUnderRandomPriorities) {
  const Cluster cluster = StarCluster(4, 100e9, 1e-6, 80, 4);
  std::mt19937 rng(7);
  const int n = cluster.num_devices();
  std::uniform_int_distribution<int> device(0, n - 1), log_bytes(12, 26), priority(0, 3);
  Schedule s(n);
  for (int k = 0; k < 300; ++k) {
    const DeviceId a = device(rng);
    DeviceId b = device(rng);
    if (b == a) b = (a + 1) % n;
    Send(s, a, b, static_cast<double>(std::int64_t{1} << log_bytes(rng)), static_cast<std::uint8_t>(k % 4 + 1),
         static_cast<std::uint8_t>(priority(rng)));
  }
  ASSERT_TRUE(s.Check().ok()) << s.Check();
  const SimResult inc = SimulateTraffic(s, cluster, RateUpdates::kIncremental);
  const SimResult full = SimulateTraffic(s, cluster, RateUpdates::kFull);
  EXPECT_EQ(inc.task_start_s, full.task_start_s);
  EXPECT_EQ(inc.task_end_s, full.task_end_s);
  EXPECT_GT(inc.iteration_time_s, 0);
}

}  // namespace
}  // namespace testbed::testing
