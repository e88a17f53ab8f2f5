#include "dapple_partitioner.h"

#include "absl/strings/str_cat.h"
#include "dapple_planner.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::dapple {
namespace {

// Link times of a uniform plan with these degrees, in Megatron-LM's device order.
StageEnvironment Environment(const PlanningContext& ctx, int tp, int pp, int dp) {
  const std::vector<DeviceId> map = DefaultDeviceMap(tp, pp, dp);
  auto dev = [&](int d, int s) { return map[static_cast<size_t>((d * pp + s) * tp)]; };
  StageEnvironment env;
  const double elem = BytesPerElement(StoragePrecision(ctx.train.precision));
  for (int s = 0; s < pp; ++s) {
    if (s + 1 < pp) {
      const double bw = ctx.cluster.PathBandwidth(dev(0, s), dev(0, s + 1));
      env.seconds_per_byte.push_back(bw > 0 ? 1.0 / bw : 0.0);
      env.boundary_latency.push_back(ctx.cluster.PathLatency(dev(0, s), dev(0, s + 1)));
    }
    double per_param = 0;
    if (dp > 1) {
      // Ring all-reduce: 2 (dp - 1) / dp of the gradient bytes over the slowest hop.
      const double bw = ctx.cluster.PathBandwidth(dev(0, s), dev(dp - 1, s));
      per_param = bw > 0 ? 2.0 * (dp - 1) / dp * elem / bw : 0.0;
    }
    env.allreduce_s_per_param.push_back(per_param);
  }
  return env;
}

}  // namespace

absl::StatusOr<Plan> DapplePartitioner::Partition(const PlanningContext& ctx) {
  const int devices = ctx.cluster.num_devices();
  int evaluated = 0;
  double latency = 0;
  // The rule learns the TP degree and micro-batch size of the plan being built from the
  // request ([parallel], [train]): a search calls it for other degrees with these costs.
  StageRule rule = [&](int pp, int chunks) -> absl::StatusOr<std::vector<StageSpec>> {
    if (chunks != 1) return absl::InvalidArgumentError("dapple plans one model chunk per stage");
    const int tp = ctx.parallel.tp;
    const int dp = ctx.parallel.dp > 0 ? ctx.parallel.dp : std::max(1, devices / (tp * pp));
    TESTBED_ASSIGN_OR_RETURN(UnitCosts units, ProfileUnits(ctx, tp, ctx.train.micro_batch));
    TESTBED_ASSIGN_OR_RETURN(std::int64_t m, MicroBatchesPerReplica(ctx.train, dp));
    TESTBED_ASSIGN_OR_RETURN(DapplePlan plan, PlanDapple(units, pp, static_cast<int>(m), Environment(ctx, tp, pp, dp)));
    evaluated += plan.evaluated;
    latency = plan.latency.seconds;
    std::vector<StageSpec> stages;
    int u = 0;
    for (int c : plan.counts) {
      stages.push_back(StageSpec{units.begin[static_cast<size_t>(u)], units.begin[static_cast<size_t>(u + c)], 0});
      u += c;
    }
    return stages;
  };
  Plan plan;
  if (search_) {
    SearchSpace space = DefaultSearchSpace(ctx);
    space.chunks = 1;
    TESTBED_ASSIGN_OR_RETURN(SearchResult found, SearchPlans(ctx, space, rule));
    plan = std::move(found.plan);
  } else {
    TESTBED_ASSIGN_OR_RETURN(plan, MakePlan(ctx, ctx.parallel.tp, ctx.parallel.pp, ctx.parallel.dp, 1,
                                            ctx.train.micro_batch, ctx.parallel.recompute, rule));
  }
  plan.planner_metrics.Add("dapple_splits_scored", evaluated, "splits");
  plan.planner_metrics.Add("dapple_latency_s", latency, "s");
  return plan;
}

}  // namespace testbed::dapple
