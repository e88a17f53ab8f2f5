#include "engine/plan_backend.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/planning_chain.h"
#include "engine/stage_costs.h"
#include "testbed/device_model.h"
#include "testbed/partitioner.h"
#include "testbed/status_macros.h"

namespace testbed {

const BackendInfo& PlanBackend::Info() {
  static const BackendInfo info = [] {
    BackendInfo b;
    b.name = "plan";
    b.doc = "planners only: stage balance, per-stage cost and planning time";
    b.default_metric = "stage_balance";
    b.kinds = {{ComponentKind::kPartitioner, true, "megatron.uniform"},
               {ComponentKind::kDeviceModel, true, "roofline"}};
    AddPlanningKinds(b);
    return b;
  }();
  return info;
}

absl::StatusOr<RunOutput> PlanBackend::Run(const ResolvedRun& run, const Registry& registry, const RunControl&) {
  const ComponentChoice& dm_choice = *run.Component(ComponentKind::kDeviceModel);
  TESTBED_ASSIGN_OR_RETURN(auto device_model, registry.Create<DeviceModel>(dm_choice.name, dm_choice.params));

  PlanningContext ctx{*run.model, *run.cluster, run.train, run.parallel, *device_model, run.seed, {}};
  StepInputs inputs;
  TESTBED_ASSIGN_OR_RETURN(PlanningOutcome planned, RunPlanningChain(run, registry, ctx, inputs));
  const Plan* plan = &planned.plan;

  TESTBED_ASSIGN_OR_RETURN(StageCosts costs, ComputeStageCosts(*plan, *run.model, *run.cluster, run.train, *device_model));
  RunOutput out;
  const auto grid = plan->Uniform();
  out.metrics.Add("tp", grid ? grid->tp : plan->tp(0), "devices");
  out.metrics.Add("pp", plan->pp(), "stages");
  out.metrics.Add("dp", (grid ? grid->dp : plan->dp(0)) / plan->cp(), "replicas");
  if (plan->cp() > 1) out.metrics.Add("cp", plan->cp(), "ranks");
  out.metrics.Add("micro_batch", static_cast<double>(plan->micro_batch), "samples");
  out.metrics.Add("micro_batches", static_cast<double>(grid ? grid->micro_batches : plan->MicroBatches(0, 0)),
                  "micro-batches");
  out.metrics.Add("stage_time_max_s", costs.max_time_s, "s", Better::kLower);
  out.metrics.Add("stage_time_mean_s", costs.mean_time_s, "s", Better::kLower);
  out.metrics.Add("stage_balance", costs.balance, "1", Better::kLower);
  out.metrics.Add("stage_params_max", static_cast<double>(costs.max_params), "params", Better::kLower);
  out.metrics.Merge(planned.metrics);
  out.metrics.Merge(plan->planner_metrics);
  out.tables.push_back(costs.ToTable());
  for (const Table& t : plan->planner_tables) out.tables.push_back(t);
  return out;
}

}  // namespace testbed
