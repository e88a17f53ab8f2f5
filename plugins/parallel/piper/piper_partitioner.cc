#include "piper_partitioner.h"

#include "piper_planner.h"
#include "testbed/memory_model.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::piper {
namespace {

absl::StatusOr<Environment> MakeEnvironment(const PlanningContext& ctx, int tp, int pp, int dp) {
  Environment env;
  env.pp = pp;
  env.dp = dp;
  TESTBED_ASSIGN_OR_RETURN(std::int64_t m, MicroBatchesPerReplica(ctx.train, dp));
  env.micro_batches = static_cast<int>(m);
  const std::vector<DeviceId> map = DefaultDeviceMap(tp, pp, dp);
  auto dev = [&](int d, int s) { return map[static_cast<size_t>((d * pp + s) * tp)]; };
  const double elem = BytesPerElement(StoragePrecision(ctx.train.precision));
  env.static_bytes_per_param = StaticBytes(1.0, ctx.train.precision, ctx.train.optimizer, ctx.parallel.zero_stage, dp).total();
  for (int s = 0; s < pp; ++s) {
    if (s + 1 < pp) {
      const double bw = ctx.cluster.PathBandwidth(dev(0, s), dev(0, s + 1));
      env.send_s_per_byte.push_back(bw > 0 ? 1.0 / bw : 0.0);
      env.send_latency.push_back(ctx.cluster.PathLatency(dev(0, s), dev(0, s + 1)));
    }
    const double bw = dp > 1 ? ctx.cluster.PathBandwidth(dev(0, s), dev(dp - 1, s)) : 0.0;
    env.allreduce_s_per_param.push_back(dp > 1 && bw > 0 ? 2.0 * (dp - 1) / dp * elem / bw : 0.0);
    env.capacity_bytes.push_back(static_cast<double>(ctx.cluster.spec_of(dev(0, s)).memory_bytes));
  }
  return env;
}

}  // namespace

absl::StatusOr<Plan> PiperPartitioner::Partition(const PlanningContext& ctx) {
  const int devices = ctx.cluster.num_devices();
  int evaluated = 0;
  double max_load = 0;
  std::vector<bool> recompute;
  // As for the other baselines: costs at the requested TP degree and micro-batch size.
  StageRule rule = [&](int pp, int chunks) -> absl::StatusOr<std::vector<StageSpec>> {
    if (chunks != 1) return absl::InvalidArgumentError("piper plans one model chunk per stage");
    const int tp = ctx.parallel.tp;
    const int dp = ctx.parallel.dp > 0 ? ctx.parallel.dp : std::max(1, devices / (tp * pp));
    TESTBED_ASSIGN_OR_RETURN(std::vector<Unit> units, ProfileUnits(ctx, tp, ctx.train.micro_batch));
    TESTBED_ASSIGN_OR_RETURN(Environment env, MakeEnvironment(ctx, tp, pp, dp));
    TESTBED_ASSIGN_OR_RETURN(PiperPlan plan, PlanPiper(units, env));
    evaluated += plan.evaluated;
    max_load = plan.max_load;
    recompute = plan.recompute;
    std::vector<StageSpec> stages;
    int u = 0;
    for (size_t s = 0; s < plan.counts.size(); ++s) {
      const int c = plan.counts[s];
      StageSpec st{units[static_cast<size_t>(u)].first_layer, units[static_cast<size_t>(u + c - 1)].end_layer, 0};
      stages.push_back(st);
      u += c;
    }
    return stages;
  };
  // Piper's per-stage recomputation, from the rule's last call, onto a plan of that call.
  auto apply_recompute = [&](Plan& plan) {
    bool any = false;
    for (size_t s = 0; s < plan.stages.size() && s < recompute.size(); ++s) {
      StageSpec& st = plan.stages[s].chunks.front();
      st.recompute_layers = recompute[s] ? st.end_layer - st.first_layer : 0;
      any = any || recompute[s];
    }
    // Without full recomputation anywhere the run's own policy (e.g. selective) stays; a plan
    // has one policy, so a stage that recomputes fully makes it "full" for the record.
    const RecomputeMode own = ctx.parallel.recompute == RecomputeMode::kSelective ? RecomputeMode::kSelective
                                                                                  : RecomputeMode::kNone;
    plan.recompute = any ? RecomputeMode::kFull : own;
  };
  Plan plan;
  if (search_) {
    SearchSpace space = DefaultSearchSpace(ctx);
    space.chunks = 1;
    space.recompute = {RecomputeMode::kNone};  // Piper decides recomputation per stage
    // Each candidate is scored with its own recomputation (the search calls the rule, then
    // scores the plan it built).
    PlanningContext wrapped{ctx.model, ctx.cluster, ctx.train, ctx.parallel, ctx.device_model, ctx.seed, {}};
    if (ctx.evaluate) {
      wrapped.evaluate = [&](const Plan& candidate) {
        Plan p = candidate;
        apply_recompute(p);
        return ctx.evaluate(p);
      };
    }
    TESTBED_ASSIGN_OR_RETURN(SearchResult found, SearchPlans(wrapped, space, rule));
    plan = std::move(found.plan);
    TESTBED_RETURN_IF_ERROR(rule(plan.pp(), 1).status());  // the chosen plan's own choices
  } else {
    TESTBED_ASSIGN_OR_RETURN(plan, MakePlan(ctx, ctx.parallel.tp, ctx.parallel.pp, ctx.parallel.dp, 1,
                                            ctx.train.micro_batch, RecomputeMode::kNone, rule));
  }
  apply_recompute(plan);
  plan.planner_metrics.Add("piper_stages_scored", evaluated, "stages");
  plan.planner_metrics.Add("piper_max_stage_load_s", max_load, "s");
  return plan;
}

}  // namespace testbed::piper
