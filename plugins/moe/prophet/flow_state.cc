#include "flow_state.h"

#include <algorithm>

namespace testbed::prophet {

FlowState::FlowState(const Routing& demand, const ExpertPlacement& start)
    : demand_(demand), ranks_(demand.ranks), experts_(demand.experts), owner_(start.owner), copies_(start.replicas) {
  holds_.assign(static_cast<size_t>(ranks_) * static_cast<size_t>(experts_), 0);
  sent_.assign(static_cast<size_t>(ranks_) * static_cast<size_t>(ranks_), 0.0);
  h_.assign(static_cast<size_t>(ranks_), 0.0);
  r_.assign(static_cast<size_t>(ranks_), 0.0);
  for (int e = 0; e < experts_; ++e) {
    holds_[static_cast<size_t>(owner(e)) * static_cast<size_t>(experts_) + static_cast<size_t>(e)] = 1;
    for (int c : copies(e)) holds_[static_cast<size_t>(c) * static_cast<size_t>(experts_) + static_cast<size_t>(e)] = 1;
    Contribute(e, 1.0);
  }
}

void FlowState::Contribute(int e, double sign) {
  const auto& cs = copies(e);
  const double holders = static_cast<double>(1 + cs.size());
  auto add = [&](int src, int dst, double n) {
    sent_[static_cast<size_t>(src) * static_cast<size_t>(ranks_) + static_cast<size_t>(dst)] += n;
    h_[static_cast<size_t>(dst)] += n;
    if (src != dst) r_[static_cast<size_t>(dst)] += n;
  };
  for (int src = 0; src < ranks_; ++src) {
    const double d = Demand(src, e);
    if (d == 0) continue;
    if (Holds(src, e)) {
      add(src, src, sign * d);
      continue;
    }
    const double share = sign * d / holders;
    add(src, owner(e), share);
    for (int c : cs) add(src, c, share);
  }
}

void FlowState::SetCopies(int e, const std::vector<int>& copies) {
  Contribute(e, -1.0);
  for (int c : copies_[static_cast<size_t>(e)]) holds_[static_cast<size_t>(c) * static_cast<size_t>(experts_) + static_cast<size_t>(e)] = 0;
  copies_[static_cast<size_t>(e)] = copies;
  for (int c : copies) holds_[static_cast<size_t>(c) * static_cast<size_t>(experts_) + static_cast<size_t>(e)] = 1;
  Contribute(e, 1.0);
}

double FlowState::ComputedFor(int rank, int e) const {
  if (!Holds(rank, e)) return 0;
  const double holders = static_cast<double>(1 + copies(e).size());
  double n = 0;
  for (int src = 0; src < ranks_; ++src) n += src == rank ? Demand(src, e) : Holds(src, e) ? 0.0 : Demand(src, e) / holders;
  return n;
}

double FlowState::MaxMessage() const {
  double m = 0;
  for (int s = 0; s < ranks_; ++s) {
    for (int d = 0; d < ranks_; ++d) {
      if (s != d) m = std::max(m, sent_[static_cast<size_t>(s) * static_cast<size_t>(ranks_) + static_cast<size_t>(d)]);
    }
  }
  return m;
}

ExpertPlacement FlowState::Placement() const {
  ExpertPlacement p;
  p.owner = owner_;
  p.replicas = copies_;
  for (auto& r : p.replicas) std::sort(r.begin(), r.end());
  return p;
}

}  // namespace testbed::prophet
