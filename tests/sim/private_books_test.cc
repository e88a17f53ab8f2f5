// Link statistics of the phases the engine runs without an activity, booked once per class of
// links (sim/private_books.h), against booking every link of the phase: the same doubles on
// every link, bit for bit, after random sequences of transfers with awkward times; links that
// another plan crosses are booked on their own; links of one class share their books.
#include "sim/private_books.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace testbed::sim {
namespace {

CommPhase Phase(std::vector<std::pair<LinkId, double>> link_bytes) {
  CommPhase ph;
  ph.link_bytes = std::move(link_bytes);
  return ph;
}

TEST(PrivateBooks, LinksWithTheSameAdditionsShareOneClass) {
  // A over links 0-2, B over 1-2 (so 1 and 2 get the same additions, 0 others), C over 3
  // (crossed by another plan too: booked on its own) and 4.
  const CommPhase a = Phase({{0, 10}, {1, 10}, {2, 10}}), b = Phase({{1, 5}, {2, 5}}), c = Phase({{3, 7}, {4, 7}});
  CommPlan other;
  other.phases.push_back(Phase({{3, 1}}));
  const std::vector<const CommPhase*> fixed{&a, &b, &c};
  const std::vector<const CommPlan*> others{&other};
  PrivateBooks books;
  const std::vector<PrivateBooks::Books> got = books.Plan(5, fixed, others);
  ASSERT_EQ(got.size(), 3u);
  // Classes in link order: {0}, {1, 2}, {4}.
  EXPECT_EQ(got[0], (PrivateBooks::Books{{0, 10}, {1, 10}}));
  EXPECT_EQ(got[1], (PrivateBooks::Books{{1, 5}}));
  EXPECT_EQ(got[2], (PrivateBooks::Books{{-4, 7}, {2, 7}}));
}

TEST(PrivateBooks, ClassSumsAreEveryLinksSumsBitForBit) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const size_t links = 12;
    // Phases over random link sets with random bytes (some equal, so that classes form).
    std::vector<CommPhase> phases;
    for (int p = 0; p < 6; ++p) {
      std::vector<std::pair<LinkId, double>> lb;
      const double bytes = 1000.0 * static_cast<double>(1 + rng() % 3) / 3.0;
      for (LinkId l = 0; l < static_cast<LinkId>(links); ++l) {
        if (rng() % 3 == 0) lb.emplace_back(l, rng() % 4 == 0 ? bytes * 0.1 : bytes);
      }
      if (lb.empty()) lb.emplace_back(static_cast<LinkId>(rng() % links), bytes);
      phases.push_back(Phase(std::move(lb)));
    }
    CommPlan other;
    other.phases.push_back(Phase({{static_cast<LinkId>(rng() % links), 3.0}}));
    std::vector<const CommPhase*> fixed;
    for (const CommPhase& ph : phases) fixed.push_back(&ph);
    const std::vector<const CommPlan*> others{&other};
    PrivateBooks books;
    const std::vector<PrivateBooks::Books> plan = books.Plan(links, fixed, others);
    std::vector<SimLinkStats> got(links), want(links);
    // The other plan's link also gets additions of its own in between (as LinkSharing would).
    const LinkId shared = other.phases.front().link_bytes.front().first;
    double now = 0.1;
    for (int k = 0; k < 400; ++k) {
      const size_t p = rng() % phases.size();
      const double start = now, end = now + 1e-3 / static_cast<double>(1 + rng() % 7);
      books.Book(plan[p], start, end, got);
      for (const auto& [link, bytes] : phases[p].link_bytes) {
        want[static_cast<size_t>(link)].bytes += bytes;
        want[static_cast<size_t>(link)].busy_s += end - start;
      }
      if (rng() % 5 == 0) {
        for (auto* s : {&got, &want}) {
          (*s)[static_cast<size_t>(shared)].bytes += 3.0;
          (*s)[static_cast<size_t>(shared)].busy_s += 1.0 / 3.0;
        }
      }
      now = end;
    }
    books.Into(got);
    for (size_t l = 0; l < links; ++l) {
      EXPECT_EQ(got[l].bytes, want[l].bytes) << "trial " << trial << " link " << l;
      EXPECT_EQ(got[l].busy_s, want[l].busy_s) << "trial " << trial << " link " << l;
    }
  }
}

}  // namespace
}  // namespace testbed::sim
