// Kind `shard_planner`: under sharded data parallelism (zero_stage = 3), how each layer's
// weights are split over the cluster's link classes, so that the pieces' all-gathers and
// reduce-scatters move over several links at once (HSDP). It runs in the planning chain after
// the precision policy (a layer's bytes depend on its widths) and writes Plan::param_links;
// the scheduler then gathers and reduce-scatters each piece pinned to its class
// (Task::links) on its own stream. Without a shard planner every layer is one piece on the
// cluster's own routes (ZeRO-3 / FSDP).
//
// Version 1 of the interface:
//   Refine(ctx) sets ctx.plan.param_links: at most two link classes and, per layer of the
//   model, the share of its bytes on each (summing to 1), and may add planner metrics
//   (predicted times, solver statistics) and tables to the plan. InvalidArgument when the
//   plan does not shard its weights or a class has no route within a data-parallel group.
#pragma once

#include "testbed/plan_refiner.h"

namespace testbed {

inline constexpr int kShardPlannerVersion = 1;

class ShardPlanner : public PlanRefiner {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kShardPlanner;
};

}  // namespace testbed
