#include "hetero_search.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hetero_plan.h"
#include "hetero_split.h"
#include "testbed/status_macros.h"

namespace testbed::h2 {

void ForEachGrouping(CostModel& model, bool search_order,
                     const std::function<void(const std::vector<StageGroup>&)>& visit) {
  const auto& types = model.types();
  const int k = static_cast<int>(types.size());
  const std::int64_t heads = model.ctx().model.shape.heads;
  const std::int64_t m = model.micro_batches();
  std::vector<int> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  do {
    for (std::int64_t d = 1; d <= m; ++d) {
      if (m % d != 0) continue;
      // TP choices per type at this D.
      std::vector<std::vector<int>> tps(static_cast<size_t>(k));
      bool possible = true;
      for (int i = 0; i < k && possible; ++i) {
        const ChipType& chip = types[static_cast<size_t>(order[static_cast<size_t>(i)])];
        const std::int64_t n = static_cast<std::int64_t>(chip.devices.size());
        for (int t = 1; t <= chip.per_node; t *= 2) {
          if ((heads > 0 && heads % t != 0) || n % (d * t) != 0) continue;
          tps[static_cast<size_t>(i)].push_back(t);
        }
        possible = !tps[static_cast<size_t>(i)].empty();
      }
      if (!possible) continue;
      std::vector<size_t> pick(static_cast<size_t>(k), 0);
      while (true) {
        std::vector<StageGroup> groups;
        int stages = 0;
        for (int i = 0; i < k; ++i) {
          const int type = order[static_cast<size_t>(i)];
          const int t = tps[static_cast<size_t>(i)][pick[static_cast<size_t>(i)]];
          const int p = static_cast<int>(static_cast<std::int64_t>(types[static_cast<size_t>(type)].devices.size()) / (d * t));
          groups.push_back(StageGroup{type, p, t, static_cast<int>(d)});
          stages += p;
        }
        if (stages <= model.num_units()) visit(groups);
        int i = 0;
        while (i < k && ++pick[static_cast<size_t>(i)] == tps[static_cast<size_t>(i)].size()) pick[static_cast<size_t>(i++)] = 0;
        if (i == k) break;
      }
    }
  } while (search_order && std::next_permutation(order.begin(), order.end()));
}

absl::StatusOr<SearchOutcome> SearchLayouts(CostModel& model, const SearchOptions& options) {
  SearchOutcome out;
  absl::Status failure;
  ScoredLayout closest;  // the layout shortest of memory by the least, for the error
  double closest_short = -1;
  ForEachGrouping(model, options.search_order, [&](const std::vector<StageGroup>& groups) {
    if (!failure.ok()) return;
    ++out.groupings;
    auto split = SplitUnits(model, groups);
    if (!split.ok()) {
      failure = split.status();
      return;
    }
    Layout layout{groups, {}};
    if (!split->has_value()) {
      // No split fits: remember how close the uniform-by-count split comes, for the error.
      const int p = layout.num_stages();
      layout.units.assign(static_cast<size_t>(p), model.num_units() / p);
      for (int i = 0; i < model.num_units() % p; ++i) ++layout.units[static_cast<size_t>(i)];
      auto e = model.Evaluate(layout);
      if (e.ok() && (closest_short < 0 || e->worst_need_bytes - e->worst_have_bytes < closest_short)) {
        closest_short = e->worst_need_bytes - e->worst_have_bytes;
        closest = ScoredLayout{layout, *e};
      }
      return;
    }
    layout.units = std::move(**split);
    auto e = model.Evaluate(layout);
    if (!e.ok()) {
      failure = e.status();
      return;
    }
    ++out.layouts;
    if (!e->fits) return;
    auto& f = out.finalists;
    auto at = std::upper_bound(f.begin(), f.end(), e->iteration_s,
                               [](double v, const ScoredLayout& s) { return v < s.estimate.iteration_s; });
    const int pool = 4 * options.finalists;  // refined below, then cut to `finalists`
    if (static_cast<int>(at - f.begin()) >= pool) return;
    f.insert(at, ScoredLayout{std::move(layout), *e});
    if (static_cast<int>(f.size()) > pool) f.pop_back();
  });
  TESTBED_RETURN_IF_ERROR(failure);
  // The finalists' splits refined by the whole estimate, then ranked again.
  for (ScoredLayout& f : out.finalists) {
    TESTBED_ASSIGN_OR_RETURN(f.estimate, RefineSplit(model, f.layout));
  }
  std::stable_sort(out.finalists.begin(), out.finalists.end(), [](const ScoredLayout& a, const ScoredLayout& b) {
    return a.estimate.iteration_s < b.estimate.iteration_s;
  });
  if (static_cast<int>(out.finalists.size()) > options.finalists) out.finalists.resize(static_cast<size_t>(options.finalists));
  if (out.finalists.empty()) {
    if (closest_short < 0) {
      return absl::ResourceExhaustedError(absl::StrCat("h2: no stage grouping of the cluster's chips suits model '",
                                                       model.ctx().model.shape.name, "' (", model.num_units(),
                                                       " units)"));
    }
    const StageGroup& g = closest.layout.groups[static_cast<size_t>(closest.layout.GroupOf(closest.estimate.worst_stage))];
    return absl::ResourceExhaustedError(absl::StrFormat(
        "h2: no layout fits in memory (%d groupings tried); the closest, %s, needs %.2f GiB on stage %d (%s) of its "
        "%.2f GiB",
        out.groupings, Describe(model, closest.layout), closest.estimate.worst_need_bytes / 1073741824.0,
        closest.estimate.worst_stage, model.types()[static_cast<size_t>(g.type)].name,
        closest.estimate.worst_have_bytes / 1073741824.0));
  }
  return out;
}

}  // namespace testbed::h2
