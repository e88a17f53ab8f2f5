// One MoE layer's token flow on a placement that a search changes one expert at a time:
// per rank the tokens it computes (H) and receives (R), and the rank-to-rank matrix, kept up
// to date in O(ranks x holders) per change instead of routing every token again. It routes
// as the core does (RouteTokens in testbed/load_balancer.h): a token stays where its expert
// has a copy, else goes evenly to the expert's holders; no capacity (the planners plan
// dropless).
#pragma once

#include <vector>

#include "testbed/load_balancer.h"

namespace testbed::prophet {

class FlowState {
 public:
  FlowState(const Routing& demand, const ExpertPlacement& start);

  // Gives expert e exactly these copies (distinct ranks other than its owner).
  void SetCopies(int e, const std::vector<int>& copies);

  [[nodiscard]] int ranks() const noexcept { return ranks_; }
  [[nodiscard]] int experts() const noexcept { return experts_; }
  [[nodiscard]] int owner(int e) const { return owner_[static_cast<size_t>(e)]; }
  [[nodiscard]] const std::vector<int>& copies(int e) const { return copies_[static_cast<size_t>(e)]; }
  [[nodiscard]] bool Holds(int rank, int e) const {
    return holds_[static_cast<size_t>(rank) * static_cast<size_t>(experts_) + static_cast<size_t>(e)] != 0;
  }
  [[nodiscard]] double Demand(int rank, int e) const { return demand_.At(rank, e); }
  [[nodiscard]] const std::vector<double>& computed() const noexcept { return h_; }
  [[nodiscard]] const std::vector<double>& received() const noexcept { return r_; }
  // Tokens rank `rank` computes for expert e.
  [[nodiscard]] double ComputedFor(int rank, int e) const;
  // The largest number of tokens one rank sends one other rank.
  [[nodiscard]] double MaxMessage() const;
  [[nodiscard]] ExpertPlacement Placement() const;

 private:
  void Contribute(int e, double sign);

  Routing demand_;
  int ranks_, experts_;
  std::vector<int> owner_;
  std::vector<std::vector<int>> copies_;
  std::vector<char> holds_;   // [rank * experts + e]
  std::vector<double> sent_;  // [src * ranks + dst]
  std::vector<double> h_, r_;
};

}  // namespace testbed::prophet
