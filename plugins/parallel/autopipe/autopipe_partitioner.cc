#include "autopipe_partitioner.h"

#include "balanced_partition.h"
#include "layer_times.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::autopipe {

absl::StatusOr<Plan> AutoPipePartitioner::Partition(const PlanningContext& ctx) {
  const bool sp = ctx.parallel.sequence_parallel && ctx.parallel.tp > 1;
  // Costs at the requested TP degree and micro-batch size (a search varies both; the relative
  // costs of the sub-layers, which are all the partition depends on, barely change).
  TESTBED_ASSIGN_OR_RETURN(LayerTimes sub, SubLayerTimes(ctx.model, ctx.device_model, ctx.cluster.spec_of(0),
                                                         ctx.parallel.tp, ctx.train.micro_batch, sp,
                                                         ctx.train.precision));
  const LayerTimes items = o_.sublayers ? sub : GroupByUnit(ctx.model, sub);
  int candidates = 0;
  double predicted = 0, dp_predicted = 0;
  StageRule rule = [&](int pp, int chunks) -> absl::StatusOr<std::vector<StageSpec>> {
    TESTBED_ASSIGN_OR_RETURN(BalancedPartition part,
                             PlanPartition(items.fwd, items.bwd, pp * chunks, o_.heuristic, o_.max_candidates));
    candidates += part.candidates;
    predicted = part.score.iteration_s;
    dp_predicted = part.dp_score.iteration_s;
    return StagesFromCounts(items, part.counts);
  };
  Plan plan;
  if (o_.search) {
    SearchSpace space = DefaultSearchSpace(ctx);
    TESTBED_ASSIGN_OR_RETURN(SearchResult found, SearchPlans(ctx, space, rule));
    plan = std::move(found.plan);
    // The rule ran for every candidate; report the chosen plan's own figures.
    TESTBED_RETURN_IF_ERROR(rule(plan.pp(), plan.virtual_stages()).status());
  } else {
    TESTBED_ASSIGN_OR_RETURN(plan, MakePlan(ctx, ctx.parallel.tp, ctx.parallel.pp, ctx.parallel.dp,
                                            ctx.parallel.virtual_stages, ctx.train.micro_batch,
                                            ctx.parallel.recompute, rule));
  }
  plan.planner_metrics.Add("autopipe_candidates", candidates, "partitions");
  plan.planner_metrics.Add("autopipe_predicted_1f1b_s", predicted, "s");
  plan.planner_metrics.Add("autopipe_dp_predicted_1f1b_s", dp_predicted, "s");
  return plan;
}

}  // namespace testbed::autopipe
