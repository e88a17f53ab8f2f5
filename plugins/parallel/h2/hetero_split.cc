#include "hetero_split.h"

#include <algorithm>
#include <limits>

#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::h2 {
namespace {

// One stage's view: prefix sums over the model's units of its chip's time, parameters and
// activations, so that any range costs O(1).
struct StageView {
  std::vector<double> time, params, act;  // prefix sums, n + 1 entries
  double micro_batches = 1;               // per replica
  double static_per_param = 0;            // bytes
  double in_flight = 1;
  double capacity = 0;
};

}  // namespace

absl::StatusOr<std::optional<std::vector<int>>> SplitUnits(CostModel& model, const std::vector<StageGroup>& groups) {
  Layout layout{groups, {}};
  const int p = layout.num_stages();
  const int n = model.num_units();
  if (p < 1 || p > n) return std::optional<std::vector<int>>();
  // Stages of one group share their chip, degrees and so their prefix sums; only the
  // activations in flight differ with the position.
  std::vector<StageView> stages;
  double upper = 0;
  for (int s = 0; s < p; ++s) {
    const StageGroup& g = groups[static_cast<size_t>(layout.GroupOf(s))];
    StageView v;
    TESTBED_ASSIGN_OR_RETURN(const std::vector<UnitCost>* units, model.Units(g.type, g.tp));
    v.time.assign(1, 0.0);
    v.params.assign(1, 0.0);
    v.act.assign(1, 0.0);
    for (const UnitCost& c : *units) {
      v.time.push_back(v.time.back() + c.compute_s);
      v.params.push_back(v.params.back() + c.params);
      v.act.push_back(v.act.back() + c.activation);
    }
    v.micro_batches = static_cast<double>(model.micro_batches()) / g.dp;
    v.static_per_param = model.StaticBytesPerParam(g.dp);
    v.in_flight = std::min(v.micro_batches, static_cast<double>(p - s));
    v.capacity = static_cast<double>(model.types()[static_cast<size_t>(g.type)].spec.memory_bytes);
    upper = std::max(upper, v.micro_batches * v.time.back());
    stages.push_back(std::move(v));
  }
  const PartCost cost = [&](int s, int first, int end) {
    const StageView& v = stages[static_cast<size_t>(s)];
    const auto range = [&](const std::vector<double>& prefix) {
      return prefix[static_cast<size_t>(end)] - prefix[static_cast<size_t>(first)];
    };
    const double need = range(v.params) * v.static_per_param + v.in_flight * range(v.act);
    return need > v.capacity ? std::numeric_limits<double>::infinity() : v.micro_batches * range(v.time);
  };
  return MinMaxContiguousSplit(n, p, cost, upper);
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
