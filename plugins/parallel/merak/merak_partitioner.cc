#include "merak_partitioner.h"

#include <algorithm>

#include "proxy_graph.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::merak {

absl::StatusOr<MetricSet> MerakPartitioner::Finish(const PlanningContext& ctx, Plan& plan) {
  if (o_.proxy_graph_stages) {
    const DeviceSpec& device = ctx.cluster.spec_of(plan.DeviceOf(0, 0, 0));
    TESTBED_ASSIGN_OR_RETURN(std::vector<double> costs,
                             LayerCosts(ctx.model, ctx.device_model, device, plan.tp(0), plan.micro_batch,
                                        plan.sequence_parallel, ctx.train.precision));
    TESTBED_ASSIGN_OR_RETURN(std::vector<StageSpec> chunks, BalancedStages(costs, plan.pp() * plan.virtual_stages()));
    plan.SetChunks(chunks);
  }
  plan.knobs.tp_chunks = plan.tp(0) > 1 ? o_.tp_chunks : 1;
  TESTBED_ASSIGN_OR_RETURN(RecomputeChoice choice,
                           ChooseRecompute(ctx, plan, o_.recompute, o_.shifted_critical_path, ctx.evaluate));
  evaluations_ += choice.evaluations;
  plan.planner_metrics.Add("merak_r0", choice.r0, "1");
  return std::move(choice.metrics);
}

absl::StatusOr<Plan> MerakPartitioner::Partition(const PlanningContext& outer) {
  // Merak's runtime is built on DeepSpeed's pipeline engine, which shards the optimizer state
  // (ZeRO stage 1) at most when pipelining.
  ParallelSettings parallel = outer.parallel;
  parallel.zero_stage = std::min(o_.zero_stage, 1);
  const PlanningContext ctx{outer.model,        outer.cluster, outer.train,    parallel,
                            outer.device_model, outer.seed,    outer.evaluate, outer.collective};
  const ModelGraph& model = ctx.model;
  evaluations_ = 0;
  // The rule builds the candidate's stages before its TP degree is known; Finish redoes them
  // at the candidate's own degree. Here: proxy-graph costs at TP 1 (relative costs barely
  // change with TP), so that the search's quick memory screen sees realistic stages.
  std::vector<double> tp1_costs;
  if (o_.proxy_graph_stages) {
    TESTBED_ASSIGN_OR_RETURN(tp1_costs, LayerCosts(model, ctx.device_model, ctx.cluster.spec_of(0), 1,
                                                   ctx.train.micro_batch, false, ctx.train.precision));
  }
  StageRule rule = [&](int pp, int chunks) -> absl::StatusOr<std::vector<StageSpec>> {
    if (o_.proxy_graph_stages) return BalancedStages(tp1_costs, pp * chunks);
    return UniformBlockStages(model, pp * chunks);
  };
  if (!o_.search) {
    TESTBED_ASSIGN_OR_RETURN(Plan plan, MakePlan(ctx, ctx.parallel.tp, ctx.parallel.pp, ctx.parallel.dp, 1,
                                                 ctx.train.micro_batch, RecomputeMode::kNone, rule));
    TESTBED_RETURN_IF_ERROR(Finish(ctx, plan).status());
    plan.planner_metrics.Add("merak_evaluations", evaluations_, "plans");
    return plan;
  }
  // The core search enumerates degrees and micro-batch sizes; each candidate is finished
  // (stages, recomputation, hints) before it is scored. Recomputation "full" marks the
  // candidates so that the search's memory screen uses the cheapest activation footprint;
  // Finish replaces it with Merak's own.
  std::map<std::tuple<int, int, std::int64_t>, Plan> finished;
  PlanningContext wrapped{ctx.model, ctx.cluster, ctx.train, ctx.parallel, ctx.device_model, ctx.seed, {}};
  wrapped.evaluate = [&](const Plan& candidate) -> absl::StatusOr<MetricSet> {
    Plan plan = candidate;
    TESTBED_ASSIGN_OR_RETURN(MetricSet metrics, Finish(ctx, plan));
    finished[{plan.tp(0), plan.pp(), plan.micro_batch}] = std::move(plan);
    return metrics;
  };
  SearchSpace space = DefaultSearchSpace(ctx);
  space.recompute = {RecomputeMode::kFull};
  space.chunks = 1;
  TESTBED_ASSIGN_OR_RETURN(SearchResult found, SearchPlans(wrapped, space, rule));
  auto it = finished.find({found.plan.tp(0), found.plan.pp(), found.plan.micro_batch});
  if (it == finished.end()) return absl::InternalError("merak: the chosen plan was never finished");
  Plan plan = std::move(it->second);
  plan.planner_metrics.Merge(found.plan.planner_metrics);
  plan.planner_metrics.Add("merak_evaluations", evaluations_, "plans");
  return plan;
}

}  // namespace testbed::merak
