#include "hetero_plan.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testbed/plan_search.h"

namespace testbed::h2 {

absl::Status CheckGroups(const CostModel& model, const std::vector<StageGroup>& groups) {
  const auto& types = model.types();
  std::vector<std::int64_t> used(types.size(), 0);
  const std::int64_t heads = model.ctx().model.shape.heads;
  for (const StageGroup& g : groups) {
    if (g.type < 0 || g.type >= static_cast<int>(types.size())) {
      return absl::InvalidArgumentError(absl::StrCat("stage group of unknown chip type index ", g.type));
    }
    const ChipType& chip = types[static_cast<size_t>(g.type)];
    if (g.stages < 1 || g.tp < 1 || g.dp < 1) {
      return absl::InvalidArgumentError(absl::StrCat("chip type '", chip.name, "': stages (", g.stages, "), tp (", g.tp,
                                                     ") and dp (", g.dp, ") must be at least 1"));
    }
    if (g.tp > chip.per_node) {
      return absl::InvalidArgumentError(absl::StrCat("chip type '", chip.name, "': tp ", g.tp, " exceeds the ",
                                                     chip.per_node, " devices of its node"));
    }
    if (heads > 0 && heads % g.tp != 0) {
      return absl::InvalidArgumentError(absl::StrCat("chip type '", chip.name, "': tp ", g.tp, " does not divide the ",
                                                     heads, " attention heads"));
    }
    if (model.micro_batches() % g.dp != 0) {
      return absl::InvalidArgumentError(absl::StrCat("chip type '", chip.name, "': dp ", g.dp, " does not divide the ",
                                                     model.micro_batches(), " micro-batches of an iteration"));
    }
    used[static_cast<size_t>(g.type)] += std::int64_t{g.stages} * g.tp * g.dp;
  }
  for (size_t k = 0; k < types.size(); ++k) {
    if (used[k] != static_cast<std::int64_t>(types[k].devices.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chip type '", types[k].name, "': the stage groups use ", used[k], " chips (stages x tp x dp) but cluster '",
          model.ctx().cluster.name(), "' has ", types[k].devices.size()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLayout(const CostModel& model, const Layout& layout) {
  if (absl::Status s = CheckGroups(model, layout.groups); !s.ok()) return s;
  const int p = layout.num_stages();
  if (static_cast<int>(layout.units.size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat("the layout has ", p, " stages but ", layout.units.size(),
                                                   " unit counts"));
  }
  int total = 0;
  for (int s = 0; s < p; ++s) {
    if (layout.units[static_cast<size_t>(s)] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", s, " has no model unit"));
    }
    total += layout.units[static_cast<size_t>(s)];
  }
  if (total != model.num_units()) {
    return absl::InvalidArgumentError(absl::StrCat("the stages hold ", total, " model units (embedding, blocks, head); "
                                                   "the model has ", model.num_units()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> BuildPlan(const CostModel& model, const Layout& layout) {
  if (absl::Status s = CheckLayout(model, layout); !s.ok()) return s;
  const PlanningContext& ctx = model.ctx();
  Plan plan;
  plan.micro_batch = ctx.train.micro_batch;
  plan.recompute = ctx.parallel.recompute;
  plan.zero_stage = ctx.parallel.zero_stage;
  bool any_tp = false;
  for (const StageGroup& g : layout.groups) any_tp = any_tp || g.tp > 1;
  plan.sequence_parallel = ctx.parallel.sequence_parallel && any_tp;
  const std::vector<StageSpec> specs = StagesFromUnitCounts(ctx.model, layout.units);
  for (int s = 0; s < layout.num_stages(); ++s) {
    const StageGroup& g = layout.groups[static_cast<size_t>(layout.GroupOf(s))];
    Stage st;
    st.chunks = {specs[static_cast<size_t>(s)]};
    st.tp = g.tp;
    st.device_type = model.types()[static_cast<size_t>(g.type)].name;
    for (int r = 0; r < g.dp; ++r) {
      StageReplica rep;
      rep.micro_batches = model.micro_batches() / g.dp;
      for (int t = 0; t < g.tp; ++t) rep.devices.push_back(model.DeviceOf(layout, s, r, t));
      st.replicas.push_back(std::move(rep));
    }
    plan.stages.push_back(std::move(st));
  }
  ApplyRecompute(plan);
  if (absl::Status s = plan.Validate(static_cast<int>(ctx.model.layers.size()), ctx.cluster); !s.ok()) return s;
  return plan;
}

std::string Describe(const CostModel& model, const Layout& layout) {
  std::vector<std::string> groups, units;
  int s = 0;
  for (const StageGroup& g : layout.groups) {
    groups.push_back(absl::StrCat(model.types()[static_cast<size_t>(g.type)].name, "x", g.stages, "(tp", g.tp, ",dp",
                                  g.dp, ")"));
    std::vector<int> u;
    for (int i = 0; i < g.stages && s < static_cast<int>(layout.units.size()); ++i, ++s) {
      u.push_back(layout.units[static_cast<size_t>(s)]);
    }
    units.push_back(absl::StrJoin(u, ","));
  }
  return absl::StrCat(absl::StrJoin(groups, "|"), " units ", absl::StrJoin(units, "|"));
}

}  // namespace testbed::h2
