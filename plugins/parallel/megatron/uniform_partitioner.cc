#include "uniform_partitioner.h"

#include "absl/strings/str_cat.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::megatron {

absl::StatusOr<Plan> UniformPartitioner::Partition(const PlanningContext& ctx) {
  if (!distributed_optimizer_ || ctx.parallel.zero_stage >= 1) return Build(ctx);
  ParallelSettings parallel = ctx.parallel;
  parallel.zero_stage = 1;  // what the search weighs too
  PlanningContext sharded{ctx.model, ctx.cluster, ctx.train, parallel, ctx.device_model, ctx.seed, ctx.evaluate};
  return Build(sharded);
}

absl::StatusOr<Plan> UniformPartitioner::Build(const PlanningContext& ctx) const {
  const ModelGraph& model = ctx.model;
  const UnevenSplit split = split_;
  StageRule rule = [&model, split](int pp, int chunks) -> absl::StatusOr<std::vector<StageSpec>> {
    if (split.Even()) return UniformBlockStages(model, pp * chunks);
    return UnevenBlockStages(model, pp, chunks, split);
  };
  if (!search_) {
    return MakePlan(ctx, ctx.parallel.tp, ctx.parallel.pp, ctx.parallel.dp, ctx.parallel.virtual_stages,
                    ctx.train.micro_batch, ctx.parallel.recompute, rule);
  }
  SearchSpace space = DefaultSearchSpace(ctx);
  // Megatron-LM requires the blocks to divide evenly over the stages and chunks (the uneven
  // split checks its own rule).
  std::vector<int> pps;
  for (int pp : space.pp) {
    if (!split.Even() || model.NumBlocks() % (pp * space.chunks) == 0) pps.push_back(pp);
  }
  space.pp = pps;
  TESTBED_ASSIGN_OR_RETURN(SearchResult found, SearchPlans(ctx, space, rule));
  return std::move(found.plan);
}

}  // namespace testbed::megatron
