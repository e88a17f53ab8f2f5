#include "pipe_partitioner.h"

#include "absl/strings/str_cat.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::deepspeed {

absl::StatusOr<std::vector<StageSpec>> DeepSpeedStages(const ModelGraph& model, int parts, Method method) {
  const std::vector<int> units = UnitBoundaries(model);
  const int n = static_cast<int>(units.size()) - 1;
  if (n < parts) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model.shape.name, "' has ", n,
                                                   " DeepSpeed layers, fewer than ", parts, " stages"));
  }
  std::vector<double> weights;
  for (int u = 0; u < n; ++u) {
    double w = 1;
    if (method == Method::kParameters) {
      w = 0;
      for (int l = units[static_cast<size_t>(u)]; l < units[static_cast<size_t>(u) + 1]; ++l) {
        w += static_cast<double>(model.layers[static_cast<size_t>(l)].params);
      }
    }
    weights.push_back(w);
  }
  return StagesFromUnitCounts(model, MinMaxPartition(weights, parts));
}

absl::StatusOr<Plan> PipePartitioner::Partition(const PlanningContext& ctx) {
  const ModelGraph& model = ctx.model;
  const Method method = method_;
  StageRule rule = [&model, method](int pp, int chunks) { return DeepSpeedStages(model, pp * chunks, method); };
  ParallelSettings parallel = ctx.parallel;
  parallel.zero_stage = ctx.parallel.pp > 1 || search_ ? std::min(zero_, 1) : zero_;
  PlanningContext local{ctx.model, ctx.cluster, ctx.train, parallel, ctx.device_model, ctx.seed, ctx.evaluate};
  if (!search_) {
    TESTBED_ASSIGN_OR_RETURN(Plan plan, MakePlan(local, ctx.parallel.tp, ctx.parallel.pp, ctx.parallel.dp,
                                                 ctx.parallel.virtual_stages, ctx.train.micro_batch,
                                                 ctx.parallel.recompute, rule));
    if (plan.pp() > 1) plan.zero_stage = std::min(plan.zero_stage, 1);
    return plan;
  }
  SearchSpace space = DefaultSearchSpace(local);
  TESTBED_ASSIGN_OR_RETURN(SearchResult found, SearchPlans(local, space, rule));
  return std::move(found.plan);
}

}  // namespace testbed::deepspeed
