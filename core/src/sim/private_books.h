// The link statistics of transfers the engine runs without an activity (a phase over private
// links only: LinkSharing::PrivateTransferTime), booked once per class of links instead of
// once per link. Every transfer of such a phase adds its bytes on each link and its time to
// each link's busy time; a link that only such phases cross, with the same bytes from each of
// them as another such link, therefore receives the same additions in the same order as that
// one (a tensor-parallel gang's NVLink ports: sixteen links of one class, per all-reduce).
// Each class keeps one sum, handed to each of its links at the end: the same doubles as
// booking every link. A link that some other plan crosses too (one that becomes an activity,
// booked by LinkSharing as it runs) is booked on its own, in the order of all its additions.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sim/simulator.h"
#include "testbed/collective.h"

namespace testbed::sim {

class PrivateBooks {
 public:
  // Where one phase's transfers are booked: (slot, bytes), slot >= 0 a class, slot < 0 the
  // link -(slot + 1) on its own.
  using Books = std::vector<std::pair<std::int32_t, double>>;

  // The classes for phases `fixed` (each over private links only, each link once) among the
  // plans `others` in use, on a cluster of `links` links: the books of each fixed phase, in
  // order. Replaces any classes made before.
  [[nodiscard]] std::vector<Books> Plan(size_t links, std::span<const CommPhase* const> fixed,
                                        std::span<const CommPlan* const> others);

  // A transfer of a phase with `books` ran from `start` to `end`.
  void Book(const Books& books, double start, double end, std::vector<SimLinkStats>& stats) noexcept {
    for (const auto& [slot, bytes] : books) {
      SimLinkStats& st = slot >= 0 ? sums_[static_cast<size_t>(slot)] : stats[static_cast<size_t>(-(slot + 1))];
      st.bytes += bytes;
      st.busy_s += end - start;
    }
  }

  // Each class's sums into its links' statistics (which nothing else booked).
  void Into(std::vector<SimLinkStats>& stats) const;

 private:
  std::vector<SimLinkStats> sums_;               // by class
  std::vector<std::vector<std::int32_t>> links_;  // by class: its links
};

}  // namespace testbed::sim
