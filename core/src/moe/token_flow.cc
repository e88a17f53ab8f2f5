// Routing tokens onto an expert placement (testbed/load_balancer.h), shared by the load
// balancers' cost models and the simulator's expansion.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "testbed/load_balancer.h"

namespace testbed {

double TokenFlow::SentAway(int rank) const {
  double n = 0;
  for (int d = 0; d < ranks; ++d) n += d == rank ? 0.0 : At(rank, d);
  return n;
}

double TokenFlow::Received(int rank) const {
  double n = 0;
  for (int s = 0; s < ranks; ++s) n += s == rank ? 0.0 : At(s, rank);
  return n;
}

TokenFlow RouteTokens(const Routing& demand, const ExpertPlacement& placement, double capacity) {
  const int ranks = demand.ranks;
  TokenFlow f;
  f.ranks = ranks;
  f.sent.assign(static_cast<size_t>(ranks) * static_cast<size_t>(ranks), 0.0);
  f.computed.assign(static_cast<size_t>(ranks), 0.0);
  for (int src = 0; src < ranks; ++src) {
    for (int ex = 0; ex < demand.experts; ++ex) {
      double t = demand.At(src, ex);
      if (capacity >= 0 && t > capacity) {
        f.dropped += t - capacity;
        t = capacity;
      }
      const auto& copies = placement.replicas[static_cast<size_t>(ex)];
      const int owner = placement.owner[static_cast<size_t>(ex)];
      auto deliver = [&](int dst, double n) {
        f.sent[static_cast<size_t>(src) * static_cast<size_t>(ranks) + static_cast<size_t>(dst)] += n;
        f.computed[static_cast<size_t>(dst)] += n;
      };
      if (owner == src || std::find(copies.begin(), copies.end(), src) != copies.end()) {
        deliver(src, t);
        continue;
      }
      const double share = t / static_cast<double>(1 + copies.size());
      deliver(owner, share);
      for (int c : copies) deliver(c, share);
    }
  }
  return f;
}

ExpertPlacement DefaultPlacement(int experts, int ranks) {
  ExpertPlacement p;
  p.owner.resize(static_cast<size_t>(experts));
  p.replicas.resize(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) p.owner[static_cast<size_t>(e)] = e % std::max(1, ranks);
  return p;
}

absl::Status CheckPlacement(const ExpertPlacement& p, int experts, int ranks, const std::string& what) {
  if (static_cast<int>(p.owner.size()) != experts || p.replicas.size() != p.owner.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the placement lists ", p.owner.size(), " owners and ",
                                                   p.replicas.size(), " replica lists; the layer has ", experts,
                                                   " experts"));
  }
  for (int e = 0; e < experts; ++e) {
    const int owner = p.owner[static_cast<size_t>(e)];
    if (owner < 0 || owner >= ranks) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expert ", e, " is owned by rank ", owner,
                                                     ", outside the expert-parallel group of ", ranks));
    }
    std::vector<int> seen;
    for (int r : p.replicas[static_cast<size_t>(e)]) {
      if (r < 0 || r >= ranks || r == owner || std::find(seen.begin(), seen.end(), r) != seen.end()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": expert ", e, " has a copy on rank ", r,
                                                       "; copies go on distinct ranks of the group of ", ranks,
                                                       " other than the owner ", owner));
      }
      seen.push_back(r);
    }
  }
  return absl::OkStatus();
}

double BalanceDegree(const std::vector<double>& tokens) noexcept {
  if (tokens.empty()) return 0;
  double mean = 0;
  for (double t : tokens) mean += t;
  mean /= static_cast<double>(tokens.size());
  double var = 0;
  for (double t : tokens) var += (t - mean) * (t - mean);
  return std::sqrt(var / static_cast<double>(tokens.size()));
}

}  // namespace testbed
