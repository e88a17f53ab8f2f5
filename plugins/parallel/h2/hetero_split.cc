#include "hetero_split.h"

#include <algorithm>

#include "testbed/status_macros.h"

namespace testbed::h2 {
namespace {

struct StageView {
  const std::vector<UnitCost>* units = nullptr;
  double micro_batches = 1;     // per replica
  double static_per_param = 0;  // bytes
  double in_flight = 1;
  double capacity = 0;
};

}  // namespace

absl::StatusOr<std::optional<std::vector<int>>> SplitUnits(CostModel& model, const std::vector<StageGroup>& groups) {
  Layout layout{groups, {}};
  const int p = layout.num_stages();
  const int n = model.num_units();
  if (p < 1 || p > n) return std::optional<std::vector<int>>();
  std::vector<StageView> stages;
  for (int s = 0; s < p; ++s) {
    const StageGroup& g = groups[static_cast<size_t>(layout.GroupOf(s))];
    StageView v;
    TESTBED_ASSIGN_OR_RETURN(v.units, model.Units(g.type, g.tp));
    v.micro_batches = static_cast<double>(model.micro_batches()) / g.dp;
    v.static_per_param = model.StaticBytesPerParam(g.dp);
    v.in_flight = std::min(v.micro_batches, static_cast<double>(p - s));
    v.capacity = static_cast<double>(model.types()[static_cast<size_t>(g.type)].spec.memory_bytes);
    stages.push_back(v);
  }
  // The greedy split under `bound` (seconds of work per iteration); empty when it fails.
  auto greedy = [&](double bound) {
    std::vector<int> counts;
    int u = 0;
    for (int s = 0; s < p; ++s) {
      const StageView& v = stages[static_cast<size_t>(s)];
      const int last = n - (p - s - 1);  // leave one unit for every later stage
      double work = 0, params = 0, act = 0;
      int end = u;
      while (end < last) {
        const UnitCost& c = (*v.units)[static_cast<size_t>(end)];
        const double w = work + v.micro_batches * c.compute_s;
        const double need = (params + c.params) * v.static_per_param + v.in_flight * (act + c.activation);
        if (w > bound || need > v.capacity) break;
        work = w;
        params += c.params;
        act += c.activation;
        ++end;
      }
      if (end == u || (s + 1 == p && end != n)) return std::vector<int>();
      counts.push_back(end - u);
      u = end;
    }
    return counts;
  };
  double hi = 0;
  for (const StageView& v : stages) {
    double total = 0;
    for (const UnitCost& c : *v.units) total += c.compute_s;
    hi = std::max(hi, v.micro_batches * total);
  }
  hi *= 1.0 + 1e-12;
  if (greedy(hi).empty()) return std::optional<std::vector<int>>();  // nothing fits
  double lo = 0;
  for (int it = 0; it < 200 && hi - lo > 1e-12 * hi; ++it) {
    const double mid = (lo + hi) / 2;
    (greedy(mid).empty() ? lo : hi) = mid;
  }
  return std::optional<std::vector<int>>(greedy(hi));
}

absl::StatusOr<Estimate> RefineSplit(CostModel& model, Layout& layout) {
  TESTBED_ASSIGN_OR_RETURN(Estimate best, model.Evaluate(layout));
  const int p = layout.num_stages();
  for (int round = 0; round < 4 * model.num_units(); ++round) {
    bool moved = false;
    for (int b = 0; b + 1 < p && !moved; ++b) {
      for (int dir : {-1, 1}) {  // -1: stage b gives its last unit to b + 1; +1: takes b + 1's first
        Layout next = layout;
        next.units[static_cast<size_t>(b)] += dir;
        next.units[static_cast<size_t>(b + 1)] -= dir;
        if (next.units[static_cast<size_t>(b)] < 1 || next.units[static_cast<size_t>(b + 1)] < 1) continue;
        TESTBED_ASSIGN_OR_RETURN(Estimate e, model.Evaluate(next));
        if (e.fits && e.iteration_s < best.iteration_s * (1 - 1e-12)) {
          layout = std::move(next);
          best = e;
          moved = true;
          break;
        }
      }
    }
    if (!moved) break;
  }
  return best;
}

}  // namespace testbed::h2
