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
#include <functional>
#include <optional>
#include <random>
#include <vector>

namespace testbed::sim {
namespace {

struct Ev {
  double time;
  std::uint32_t seq;
};

void PushBoth(EventQueue<Ev>& q, std::vector<Ev>& pending, const Ev& e) {
  q.push(e);
  pending.push_back(e);
}

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

// `steps` steps against the reference, each a push (`next(step, now)` gives the time, or
// nothing for a take instead) or a take, then drained to the end; the number of takes.
int Exercise(int steps, const std::function<std::optional<double>(int, double)>& next) {
  EventQueue<Ev> q;
  std::vector<Ev> pending;  // the reference: everything pushed and not taken
  std::uint32_t seq = 0;
  double now = 0;
  int taken = 0;
  for (int step = 0; step < steps; ++step) {
    const std::optional<double> t = next(step, now);
    if (pending.empty() || t) {
      PushBoth(q, pending, Ev{t.value_or(now), seq++});
      continue;
    }
    now = TakeEarliest(q, pending);
    if (std::isnan(now)) return taken;
    ++taken;
  }
  ExpectDrainsInOrder(q, pending);
  return taken;
}

TEST(EventQueue, PopsInTimeThenCreationOrder) {
  std::mt19937 rng(7);
  // Few distinct times, so that most comparisons are ties.
  const std::vector<double> times = {0.0, -0.0, 1e-9, 0.5, 0.5, 1.0, 3.25, 1e300, 5e-324};
  const int taken = Exercise(20000, [&](int, double now) -> std::optional<double> {
    if (rng() % 3 == 0) return std::nullopt;
    // Events never lie before the present, as in the engine.
    double t = times[rng() % times.size()];
    if (t < now) t = now + times[rng() % times.size()];
    return t;
  });
  EXPECT_GT(taken, 5000);
}

TEST(EventQueue, SpreadTimesAndEarlierPushes) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int earlier = 0;
  const int taken = Exercise(30000, [&](int step, double now) -> std::optional<double> {
    const unsigned roll = static_cast<unsigned>(rng() % 8);
    if (roll >= 5) return std::nullopt;
    // From a nanosecond to a thousand seconds ahead, some at the present, rarely before it.
    if (roll == 0) return now;
    if (roll == 1 && step % 97 == 0 && now > 0) {
      ++earlier;
      return now * unit(rng);
    }
    return now + std::pow(10.0, -9.0 + 12.0 * unit(rng));
  });
  EXPECT_GT(taken, 5000);
  EXPECT_GT(earlier, 10);
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
