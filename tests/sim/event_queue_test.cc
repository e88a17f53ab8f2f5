// The simulator's event queue gives its events in (time, creation order) order, as a sorted
// list would, with ties in time (and -0 against 0) broken by creation order, under interleaved
// pushes and takes (a push after a take fills the slot the take left).
#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace testbed::sim {
namespace {

struct Ev {
  double time;
  std::uint32_t seq;
};

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
    const auto first = std::min_element(pending.begin(), pending.end(), [](const Ev& a, const Ev& b) {
      return a.time < b.time || (a.time == b.time && a.seq < b.seq);
    });
    ASSERT_FALSE(q.empty());
    const Ev got = q.take();
    ASSERT_EQ(got.seq, first->seq) << "pop " << popped;
    ASSERT_EQ(got.time, first->time);
    now = first->time;
    pending.erase(first);
    ++popped;
  }
  EXPECT_GT(popped, 5000);
  // Drained to the end, with the slot a take leaves closed by empty().
  while (!pending.empty()) {
    const auto first = std::min_element(pending.begin(), pending.end(), [](const Ev& a, const Ev& b) {
      return a.time < b.time || (a.time == b.time && a.seq < b.seq);
    });
    ASSERT_FALSE(q.empty());
    ASSERT_EQ(q.take().seq, first->seq);
    pending.erase(first);
  }
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, APushAfterATakeFillsItsSlot) {
  EventQueue<Ev> q;
  q.push(Ev{1.0, 0});
  EXPECT_EQ(q.take().seq, 0u);
  q.push(Ev{2.0, 1});  // into the slot the take left
  q.push(Ev{0.5, 2});
  EXPECT_EQ(q.take().seq, 2u);
  EXPECT_EQ(q.take().seq, 1u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace testbed::sim
