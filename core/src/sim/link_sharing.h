// Communication in flight and the links it shares (the simulator's flow model, DESIGN.md §4).
// A transfer holds every link of its phase from the phase's start; each link's bandwidth is
// split evenly among its most urgent holders (Task::priority; the others on it get none until
// those are gone), and a transfer moves at the pace of its most constrained link. Whenever a transfer starts or stops, every transfer sharing one of its links is
// brought up to date and, if its rate changed, given a new finish time.
//
// Two ways to find the new rates, with identical results (tests/sim/link_sharing_test.cc):
//   kFull         recomputes the rate of every affected transfer over all of its links;
//   kIncremental  looks only at the links that changed: a rate can fall only through them,
//                 and it is recomputed in full only when a link that held it down got faster
//                 (a phase of many links keeps a min-tree over them instead).
// A ring all-reduce over n devices holds O(n) links, so kFull costs O(n) for each of the
// thousands of point-to-point transfers that share one of them; kIncremental costs O(1).
// Under kIncremental, a transfer that finds all its links idle when it starts (or is still
// their only holder when it stops) takes (or leaves) them without snapshots or re-rating: no
// one else is there to re-rate.
//
// A phase whose links are all private (sim/private_links.h: no other transfer can hold them
// while it moves) takes their whole bandwidth and neither re-rates anyone nor is re-rated:
// it starts and stops without the sharing bookkeeping, with the same finish time and link
// statistics as the general path. The engine marks links private under kIncremental only, so
// that kFull stays the former engine. A plan of one such phase does not even become an
// activity: the engine times it and books its links when it starts (PrivateTransferTime,
// BookPrivate), once per class of links that receive the same additions (PlanPrivateBooks).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "sim/private_books.h"
#include "sim/simulator.h"
#include "testbed/cluster.h"
#include "testbed/collective.h"

namespace testbed::sim {

// A communication in flight: a collective, or a send together with its receive. A phase's
// bytes start flowing after its latency (so the latency costs no extra event).
struct Activity {
  TaskId task = -1;
  TaskId partner = -1;
  const CommPlan* plan = nullptr;
  size_t phase = 0;
  bool transferring = false;
  double remaining = 1.0;   // fraction of the current phase's bytes still to move
  double rate = 0.0;        // fraction per second
  double updated = 0.0;     // time `remaining` was last brought up to date
  double flows_from = 0.0;  // end of the phase's latency
  std::uint32_t version = 0;
  std::int32_t tree = -1;   // its min-tree in LinkSharing while a phase of many links moves
  std::uint8_t priority = 0;  // Task::priority
  bool alone = false;         // the current phase crosses private links only
};

class LinkSharing {
 public:
  // Called for every transfer whose finish moved: (finish time, activity, its new version).
  using Reschedule = absl::FunctionRef<void(double, std::int32_t, std::uint32_t)>;

  LinkSharing(const Cluster& cluster, RateUpdates mode);

  // Which links are private (by LinkId; sim/private_links.h). None until set.
  void SetPrivate(std::vector<char> private_links) { private_ = std::move(private_links); }
  // A new activity; its index. Nothing is held until StartTransfer. The index may be one that
  // Release gave back: its version keeps counting up, so that events of the former activity
  // stay stale.
  std::int32_t Add(TaskId task, TaskId partner, const CommPlan* plan, std::uint8_t priority = 0);
  // The activity has ended (its last phase stopped): its index may be reused.
  void Release(std::int32_t a) { free_acts_.push_back(a); }
  [[nodiscard]] Activity& act(std::int32_t a) noexcept { return acts_[static_cast<size_t>(a)]; }
  [[nodiscard]] const Activity& act(std::int32_t a) const noexcept { return acts_[static_cast<size_t>(a)]; }

  // The activity's current phase (which has link bytes) starts moving at `now`.
  void StartTransfer(std::int32_t a, double now, Reschedule reschedule);
  // The activity's current phase has moved its bytes at `now`: its links are released.
  void StopTransfer(std::int32_t a, double now, Reschedule reschedule);

  // A phase over private links only, each once and with bandwidth for its bytes, moves its
  // bytes in the same time whenever it runs: that time (what StartTransfer would give it),
  // so that the engine can run it without an activity. nullopt for any other phase.
  [[nodiscard]] std::optional<double> PrivateTransferTime(const CommPhase& ph) const;
  // Where such phases' transfers are booked (sim/private_books.h): `fixed` are those phases,
  // `others` every other plan in use; the books of each fixed phase, in order.
  [[nodiscard]] std::vector<PrivateBooks::Books> PlanPrivateBooks(std::span<const CommPhase* const> fixed,
                                                                  std::span<const CommPlan* const> others) {
    return private_books_.Plan(stats_.size(), fixed, others);
  }
  // A transfer of such a phase runs from `start` to `end`: its links' statistics, as
  // StartTransfer and StopTransfer keep them (nobody else holds those links meanwhile), booked
  // when it starts. Its links' one stream runs their transfers one after another, so each
  // link's are booked in the order they end all the same, and its sums are those of booking
  // at the end.
  void BookPrivate(const PrivateBooks::Books& books, double start, double end) noexcept {
    private_books_.Book(books, start, end, stats_);
  }
  // An activity of `priority` runs without Add (a PrivateTransferTime one): sharing must
  // still learn that priorities are in use.
  void NotePriority(std::uint8_t priority) noexcept { prioritised_ = prioritised_ || priority > 0; }

  [[nodiscard]] std::vector<SimLinkStats> TakeLinkStats() {
    private_books_.Into(stats_);
    return std::move(stats_);
  }

 private:
  struct User {
    std::int32_t act;
    std::int32_t pos;  // the link's index in the activity's phase
    double bytes;      // what it moves over this link in its phase
  };
  // A phase of at least this many links keeps its per-link rates in a min-tree, so that a
  // link getting faster costs O(log links) instead of a full recompute.
  static constexpr size_t kTreeLinks = 64;
  void BuildTree(std::int32_t a);
  void UpdateTree(const Activity& act, std::int32_t pos, double value) noexcept;
  // Snapshots the shares of `ph`'s links, adds (+1) or removes (-1) `a` as a holder of
  // each, and refreshes their shares.
  void Change(const CommPhase& ph, std::int32_t a, int delta, double now);
  // Change's +1 and -1 where `a` is the only holder of every link of `ph` (each listed once):
  // true if so, and done; false, with nothing changed, otherwise.
  [[nodiscard]] bool TakeIdleLinks(const CommPhase& ph, std::int32_t a, double now);
  [[nodiscard]] bool DropIdleLinks(const CommPhase& ph, double now);
  void Rerate(const CommPhase& ph, std::int32_t self, double now, Reschedule reschedule);
  void RerateFull(const CommPhase& ph, std::int32_t self, double now, Reschedule reschedule);
  [[nodiscard]] double FullRate(const Activity& act) const;
  // Brings `remaining` up to `now` and sets the new rate; reschedules if it changed.
  void Apply(std::int32_t b, double rate, bool force, double now, Reschedule reschedule);
  void Mark(std::int32_t b);
  [[nodiscard]] bool AllPrivate(const CommPhase& ph) const noexcept;
  // The rate (fraction of the phase per second) of a phase alone on its links: its most
  // loaded link's whole bandwidth; +inf for a phase without bytes.
  [[nodiscard]] double WholeRate(const CommPhase& ph) const noexcept;

  // The bandwidth a holder of `priority` gets on link l: an even share among the link's most
  // urgent holders, none for the others; now, or before the last Change.
  [[nodiscard]] double Share(size_t l, std::uint8_t priority) const noexcept {
    return !prioritised_ || priority == top_[l] ? share_[l] : 0.0;
  }
  [[nodiscard]] double PrevShare(size_t l, std::uint8_t priority) const noexcept {
    return !prioritised_ || priority == prev_top_[l] ? prev_share_[l] : 0.0;
  }
  // Recounts link l's most urgent class and its share after a holder came or went.
  void Refresh(size_t l);

  RateUpdates mode_;
  std::vector<double> bandwidth_;             // by LinkId
  std::vector<char> private_;                 // by LinkId; empty: none
  std::vector<int> holders_;                  // transfers holding each link
  // bandwidth / max(1, holders of the most urgent class `top_`): now, before Change.
  std::vector<double> share_, prev_share_;
  std::vector<std::uint8_t> top_, prev_top_;
  bool prioritised_ = false;                  // some transfer had a priority above 0
  std::vector<std::vector<User>> users_;
  std::vector<double> since_;                 // when the link last became busy
  std::vector<SimLinkStats> stats_;
  PrivateBooks private_books_;
  std::vector<Activity> acts_;
  std::vector<std::int32_t> free_acts_;  // released indices, reused last in first out
  // Min-trees (leaves: each link's share / bytes, +inf for no bytes; node 1: the minimum)
  // and the free ones for reuse.
  std::vector<std::vector<double>> trees_;
  std::vector<std::int32_t> free_trees_;
  // Per activity, scratch of one re-rating: visited in which pass, candidate rate, whether
  // a link that held it down got faster; and the order of first visits.
  std::vector<std::uint32_t> mark_;
  std::vector<double> candidate_;
  std::vector<char> recompute_;
  std::vector<std::int32_t> visited_;
  std::uint32_t epoch_ = 0;
};

}  // namespace testbed::sim
