#include "search.h"

#include <algorithm>
#include <numeric>

namespace testbed::prophet {
namespace {

// Every rank but the owner and the `excluded` ranks that demand expert e least (ties: the
// higher rank is left out first, so the choice does not depend on sort stability).
std::vector<int> AllButLeast(const FlowState& f, int e, int excluded) {
  std::vector<int> others;
  for (int r = 0; r < f.ranks(); ++r) {
    if (r != f.owner(e)) others.push_back(r);
  }
  std::sort(others.begin(), others.end(), [&](int a, int b) {
    const double da = f.Demand(a, e), db = f.Demand(b, e);
    return da != db ? da > db : a < b;
  });
  others.resize(others.size() - static_cast<size_t>(std::min<int>(excluded, static_cast<int>(others.size()))));
  std::sort(others.begin(), others.end());
  return others;
}

}  // namespace

SearchResult ProProphetSearch(const MoeLayerShape& shape, const CostConstants& k, const Routing& demand,
                              const GreedyOptions& options) {
  FlowState f(demand, DefaultPlacement(demand.experts, demand.ranks));
  SearchResult best;
  best.placement = f.Placement();
  best.cost = best.start_cost = Cost(shape, k, f);
  const double threshold = options.alpha * shape.tokens_per_rank * shape.top_k / std::max(1, demand.experts);
  for (int step = 0; step < demand.experts; ++step) {
    const auto& h = f.computed();
    const auto [lo, hi] = std::minmax_element(h.begin(), h.end());
    if (*hi - *lo < threshold) break;
    const int heavy = static_cast<int>(hi - h.begin());
    int pick = -1;
    double most = -1;
    for (int e = 0; e < f.experts(); ++e) {
      if (!f.Holds(heavy, e)) continue;
      const double n = f.ComputedFor(heavy, e);
      if (n > most) {
        most = n;
        pick = e;
      }
    }
    if (pick < 0 || !f.copies(pick).empty()) break;
    std::vector<int> chosen;
    double chosen_cost = 0;
    for (int n = 0; n <= std::min(options.max_excluded, f.ranks() - 1); ++n) {
      std::vector<int> copies = AllButLeast(f, pick, n);
      f.SetCopies(pick, copies);
      const double c = Cost(shape, k, f).total_s;
      if (n == 0 || c < chosen_cost) {
        chosen_cost = c;
        chosen = std::move(copies);
      }
    }
    f.SetCopies(pick, chosen);
    const LayerCost c = Cost(shape, k, f);
    if (c.total_s < best.cost.total_s) {
      best.cost = c;
      best.placement = f.Placement();
      best.steps = step + 1;
    }
  }
  // The chosen placement's cost routed afresh (the incremental flow carries rounding).
  if (best.steps > 0) best.cost = Cost(shape, k, FlowState(demand, best.placement));
  return best;
}

SearchResult ProphetSearch(const MoeLayerShape& shape, const CostConstants& k, const Routing& demand, int max_moves) {
  FlowState f(demand, DefaultPlacement(demand.experts, demand.ranks));
  SearchResult best;
  best.placement = f.Placement();
  best.cost = best.start_cost = Cost(shape, k, f);
  double current = best.cost.total_s;
  for (int move = 0; move < max_moves; ++move) {
    int pick = -1, where = -1;
    double lowest = current;
    for (int e = 0; e < f.experts(); ++e) {
      int target = -1;
      for (int r = 0; r < f.ranks(); ++r) {
        if (!f.Holds(r, e) && (target < 0 || f.Demand(r, e) > f.Demand(target, e))) target = r;
      }
      if (target < 0 || f.Demand(target, e) == 0) continue;
      std::vector<int> copies = f.copies(e);
      const std::vector<int> before = copies;
      copies.push_back(target);
      f.SetCopies(e, copies);
      const double c = Cost(shape, k, f).total_s;
      f.SetCopies(e, before);
      if (c < lowest) {
        lowest = c;
        pick = e;
        where = target;
      }
    }
    if (pick < 0) break;
    std::vector<int> copies = f.copies(pick);
    copies.push_back(where);
    f.SetCopies(pick, copies);
    current = lowest;
    best.steps = move + 1;
  }
  best.placement = f.Placement();
  best.cost = best.steps > 0 ? Cost(shape, k, FlowState(demand, best.placement)) : best.start_cost;
  return best;
}

}  // namespace testbed::prophet
