#include "autopipe_h_partitioner.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "hetero_mapping.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::autopipe {

absl::StatusOr<Plan> AutoPipeHPartitioner::Partition(const PlanningContext& ctx) {
  const auto start = std::chrono::steady_clock::now();
  if (ctx.parallel.tp != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("autopipe_h plans data-parallel pipelines: [parallel] tp must be 1, got ", ctx.parallel.tp));
  }
  const int pp = ctx.parallel.pp;
  const int devices = ctx.cluster.num_devices();
  const int dp = ctx.parallel.dp > 0 ? ctx.parallel.dp : devices / pp;
  if (pp < 1 || pp * dp != devices) {
    return absl::InvalidArgumentError(absl::StrCat("autopipe_h: pp (", pp, ") x dp (", dp, ") must equal the ",
                                                   devices, " devices of cluster '", ctx.cluster.name(), "'"));
  }
  TESTBED_ASSIGN_OR_RETURN(std::int64_t m, MicroBatchesPerReplica(ctx.train, dp));
  std::vector<HeteroMapping> all;
  TESTBED_ASSIGN_OR_RETURN(HeteroMapping best, MapHeterogeneous(ctx, pp, dp, static_cast<int>(m), &all));
  GridSpec g;
  g.tp = 1;
  g.pp = pp;
  g.dp = dp;
  g.micro_batch = ctx.train.micro_batch;
  g.micro_batches = m;
  g.recompute = ctx.parallel.recompute;
  g.sequence_parallel = false;
  g.zero_stage = ctx.parallel.zero_stage;
  g.chunks = best.stages;
  g.device_map = best.device_map;
  Plan plan = GridPlan(g);
  ApplyRecompute(plan);
  TESTBED_RETURN_IF_ERROR(plan.Validate(static_cast<int>(ctx.model.layers.size()), ctx.cluster));
  int candidates = 0;
  for (const HeteroMapping& h : all) {
    candidates += h.candidates;
    plan.planner_metrics.Add(absl::StrCat("autopipe_h_predicted_", h.name, "_s"), h.predicted_s, "s");
  }
  plan.planner_metrics.Add("autopipe_h_mapping_fast_first", best.name == "fast-first" ? 1 : 0, "1");
  plan.planner_metrics.Add("autopipe_h_mapping_pipelines", best.name == "pipelines" ? 1 : 0, "1");
  plan.planner_metrics.Add("autopipe_h_candidates", candidates, "partitions");
  plan.planner_metrics.Add("autopipe_h_planning_s",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), "s");
  return plan;
}

}  // namespace testbed::autopipe
