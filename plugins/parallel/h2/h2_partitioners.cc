#include "h2_partitioners.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hetero_plan.h"
#include "hetero_split.h"
#include "testbed/status_macros.h"

namespace testbed::h2 {
namespace {

constexpr double kGiB = 1073741824.0;

// The stage groups the user described, checked against the cluster.
absl::StatusOr<std::vector<StageGroup>> UserGroups(const CostModel& model, const HeteroPpSettings& s,
                                                   const ParallelSettings& parallel) {
  const auto& types = model.types();
  std::vector<int> order;
  if (s.order.empty()) {
    for (size_t k = 0; k < types.size(); ++k) order.push_back(static_cast<int>(k));
  } else {
    for (const std::string& name : s.order) {
      TESTBED_ASSIGN_OR_RETURN(int k, FindChipType(types, name, model.ctx().cluster.name()));
      order.push_back(k);
    }
  }
  auto per_type = [&](const std::vector<std::int64_t>& v, const char* key, std::int64_t fallback,
                      size_t i) -> absl::StatusOr<int> {
    if (v.empty()) return static_cast<int>(fallback);
    if (v.size() != order.size()) {
      return absl::InvalidArgumentError(absl::StrCat("h2.hetero_pp: '", key, "' has ", v.size(),
                                                     " entries; 'order' names ", order.size(), " chip types"));
    }
    return static_cast<int>(v[i]);
  };
  std::vector<StageGroup> groups;
  for (size_t i = 0; i < order.size(); ++i) {
    StageGroup g;
    g.type = order[i];
    TESTBED_ASSIGN_OR_RETURN(g.tp, per_type(s.tp, "tp", parallel.tp, i));
    TESTBED_ASSIGN_OR_RETURN(g.dp, per_type(s.dp, "dp", parallel.dp > 0 ? parallel.dp : 1, i));
    const std::int64_t n = static_cast<std::int64_t>(types[static_cast<size_t>(g.type)].devices.size());
    const std::int64_t derived = g.tp > 0 && g.dp > 0 ? n / (std::int64_t{g.tp} * g.dp) : 0;
    TESTBED_ASSIGN_OR_RETURN(g.stages, per_type(s.stages, "stages", derived, i));
    groups.push_back(g);
  }
  return groups;
}

std::string StageWhere(const CostModel& model, const Layout& layout, int stage) {
  const StageGroup& g = layout.groups[static_cast<size_t>(layout.GroupOf(stage))];
  return absl::StrCat("stage ", stage, " (", model.types()[static_cast<size_t>(g.type)].name, ", tp ", g.tp, ", dp ",
                      g.dp, ", ", layout.units[static_cast<size_t>(stage)], " units)");
}

// The estimate and, per chip type, where its stage group sits and how it is cut.
void AddLayout(Plan& plan, const CostModel& model, const Layout& layout, const Estimate& e) {
  plan.planner_metrics.Add("h2_estimated_iteration_s", e.iteration_s, "s");
  plan.planner_metrics.Add("h2_stages", static_cast<double>(plan.pp()), "stages");
  int stage = 0;
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    const StageGroup& grp = layout.groups[g];
    const std::string prefix = absl::StrCat("h2_", model.types()[static_cast<size_t>(grp.type)].name, "_");
    int units = 0;
    for (int i = 0; i < grp.stages; ++i) units += layout.units[static_cast<size_t>(stage++)];
    plan.planner_metrics.Add(prefix + "position", static_cast<double>(g), "group");
    plan.planner_metrics.Add(prefix + "stages", grp.stages, "stages");
    plan.planner_metrics.Add(prefix + "tp", grp.tp, "devices");
    plan.planner_metrics.Add(prefix + "dp", grp.dp, "replicas");
    plan.planner_metrics.Add(prefix + "units", units, "units");
  }
}

}  // namespace

absl::StatusOr<Plan> HeteroPp::Partition(const PlanningContext& ctx) {
  TESTBED_ASSIGN_OR_RETURN(CostModel model, CostModel::Make(ctx, ChipTypes(ctx.cluster)));
  Layout layout;
  TESTBED_ASSIGN_OR_RETURN(layout.groups, UserGroups(model, settings_, ctx.parallel));
  TESTBED_RETURN_IF_ERROR(CheckGroups(model, layout.groups));
  if (!settings_.units.empty()) {
    layout.units.assign(settings_.units.begin(), settings_.units.end());
    TESTBED_RETURN_IF_ERROR(CheckLayout(model, layout));
  } else {
    if (layout.num_stages() > model.num_units()) {
      return absl::InvalidArgumentError(absl::StrCat("h2.hetero_pp: ", layout.num_stages(), " stages but model '",
                                                     ctx.model.shape.name, "' has only ", model.num_units(),
                                                     " units (embedding, blocks, head)"));
    }
    TESTBED_ASSIGN_OR_RETURN(auto split, SplitUnits(model, layout.groups));
    if (!split.has_value()) {
      // Name the stage the even split leaves shortest of memory.
      const int p = layout.num_stages();
      layout.units.assign(static_cast<size_t>(p), model.num_units() / p);
      for (int i = 0; i < model.num_units() % p; ++i) ++layout.units[static_cast<size_t>(i)];
      TESTBED_ASSIGN_OR_RETURN(Estimate e, model.Evaluate(layout));
      return absl::ResourceExhaustedError(absl::StrFormat(
          "h2.hetero_pp: no split of the layers over %s fits in memory; even by unit count %s needs %.2f GiB of its "
          "%.2f GiB",
          Describe(model, layout), StageWhere(model, layout, e.worst_stage), e.worst_need_bytes / kGiB,
          e.worst_have_bytes / kGiB));
    }
    layout.units = std::move(*split);
  }
  TESTBED_ASSIGN_OR_RETURN(Estimate e, model.Evaluate(layout));
  if (!e.fits) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "h2.hetero_pp: %s needs %.2f GiB (weights, gradients, optimizer state and the activations 1F1B keeps) but "
        "its chip has %.2f GiB",
        StageWhere(model, layout, e.worst_stage), e.worst_need_bytes / kGiB, e.worst_have_bytes / kGiB));
  }
  TESTBED_ASSIGN_OR_RETURN(Plan plan, BuildPlan(model, layout));
  AddLayout(plan, model, layout, e);
  return plan;
}

absl::StatusOr<Plan> HeteroAuto::Partition(const PlanningContext& ctx) {
  const auto start = std::chrono::steady_clock::now();
  TESTBED_ASSIGN_OR_RETURN(CostModel model, CostModel::Make(ctx, ChipTypes(ctx.cluster)));
  TESTBED_ASSIGN_OR_RETURN(SearchOutcome found, SearchLayouts(model, options_));
  const double search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::optional<Plan> best;
  const ScoredLayout* best_layout = nullptr;
  double best_throughput = -1;
  int simulated = 0;
  std::string reasons;
  for (const ScoredLayout& f : found.finalists) {
    TESTBED_ASSIGN_OR_RETURN(Plan plan, BuildPlan(model, f.layout));
    if (!ctx.evaluate) {  // no simulator: the cost model's best
      best = std::move(plan);
      best_layout = &f;
      break;
    }
    auto metrics = ctx.evaluate(plan);
    ++simulated;
    if (!metrics.ok()) {
      if (reasons.empty()) reasons = std::string(metrics.status().message());
      continue;
    }
    const Metric* thr = metrics->Find("throughput_samples_per_s");
    if (thr != nullptr && thr->value > best_throughput * (1 + 1e-9)) {
      best_throughput = thr->value;
      best = std::move(plan);
      best_layout = &f;
    }
  }
  if (!best.has_value()) {
    return absl::ResourceExhaustedError(absl::StrCat("h2.hetero_auto: none of the ", found.finalists.size(),
                                                     " finalists runs in the simulator; the first: ", reasons));
  }
  AddLayout(*best, model, best_layout->layout, best_layout->estimate);
  best->planner_metrics.Add("h2_groupings", static_cast<double>(found.groupings), "groupings");
  best->planner_metrics.Add("h2_layouts_estimated", static_cast<double>(found.layouts), "layouts");
  best->planner_metrics.Add("h2_finalists_simulated", simulated, "plans");
  best->planner_metrics.Add("h2_search_s", search_s, "s");
  return std::move(*best);
}

}  // namespace testbed::h2
