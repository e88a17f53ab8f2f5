// The simulator's event queue (a radix heap) gives its events in (time, creation order) order,
// as a sorted list would, with ties in time (and -0 against 0) broken by creation order, under
// interleaved pushes and takes: with few distinct times (mostly ties), with times spread over
// many orders of magnitude (events moving down many buckets), and with pushes before the last
// take (which the engine never makes, rebuilt).
#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace testbed::sim {
namespace {

struct Ev {
  double time;
  std::uint32_t seq;
};

// Takes one event from `q` and checks it is the reference's earliest (time, then creation);
// removes that from the reference and gives its time (NaN on a mismatch, already reported).
double TakeEarliest(EventQueue<Ev>& q, std::vector<Ev>& pending) {
  const auto first = std::min_element(pending.begin(), pending.end(), [](const Ev& a, const Ev& b) {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  });
  EXPECT_FALSE(q.empty());
  if (q.empty()) return std::nan("");
  const Ev got = q.take();
  EXPECT_EQ(got.seq, first->seq);
  EXPECT_EQ(got.time, first->time);
  const double time = first->time;
  const bool same = got.seq == first->seq;
  pending.erase(first);
  return same ? time : std::nan("");
}

// Takes from `q` and from the reference until both are empty, checking each.
void ExpectDrainsInOrder(EventQueue<Ev>& q, std::vector<Ev>& pending) {
  while (!pending.empty()) {
    if (std::isnan(TakeEarliest(q, pending))) return;
  }
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, PopsInTimeThenCreationOrder) {
  std::mt19937 rng(7);
  // Few distinct times, so that most comparisons are ties.
  const std::vector<double> times = {0.0, -0.0, 1e-9, 0.5, 0.5, 1.0, 3.25, 1e300, 5e-324};
  EventQueue<Ev> q;
  std::vector<Ev> pending;  // the reference: everything pushed and not popped
  std::uint32_t seq = 0;
  double now = 0;
  int popped = 0;
  for (int step = 0; step < 20000; ++step) {
    if (pending.empty() || rng() % 3 != 0) {
      // Events never lie before the present, as in the engine.
      double t = times[rng() % times.size()];
      if (t < now) t = now + times[rng() % times.size()];
      const Ev e{t, seq++};
      q.push(e);
      pending.push_back(e);
      continue;
    }
    now = TakeEarliest(q, pending);
    ASSERT_FALSE(std::isnan(now)) << "pop " << popped;
    ++popped;
  }
  EXPECT_GT(popped, 5000);
  ExpectDrainsInOrder(q, pending);
}

TEST(EventQueue, SpreadTimesAndEarlierPushes) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  EventQueue<Ev> q;
  std::vector<Ev> pending;
  std::uint32_t seq = 0;
  double now = 0;
  int popped = 0, earlier = 0;
  for (int step = 0; step < 30000; ++step) {
    const unsigned roll = static_cast<unsigned>(rng() % 8);
    if (pending.empty() || roll < 5) {
      // From a nanosecond to a thousand seconds ahead, some at the present, rarely before it.
      double t = now + std::pow(10.0, -9.0 + 12.0 * unit(rng));
      if (roll == 0) t = now;
      if (roll == 1 && step % 97 == 0 && now > 0) {
        t = now * unit(rng);
        ++earlier;
      }
      const Ev e{t, seq++};
      q.push(e);
      pending.push_back(e);
      continue;
    }
    now = TakeEarliest(q, pending);
    ASSERT_FALSE(std::isnan(now)) << "pop " << popped;
    ++popped;
  }
  EXPECT_GT(popped, 5000);
  EXPECT_GT(earlier, 10);
  ExpectDrainsInOrder(q, pending);
}

TEST(EventQueue, APushBeforeTheLastTakeComesFirst) {
  EventQueue<Ev> q;
  q.push(Ev{1.0, 0});
  EXPECT_EQ(q.take().seq, 0u);
  q.push(Ev{2.0, 1});
  q.push(Ev{0.5, 2});  // before the last take
  EXPECT_EQ(q.take().seq, 2u);
  EXPECT_EQ(q.take().seq, 1u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace testbed::sim
