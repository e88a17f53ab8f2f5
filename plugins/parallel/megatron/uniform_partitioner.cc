#include "uniform_partitioner.h"

#include "absl/strings/str_cat.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::megatron {

absl::StatusOr<Plan> UniformPartitioner::Partition(const PlanningContext& ctx) {
  const ModelGraph& model = ctx.model;
  StageRule rule = [&model](int pp, int chunks) { return UniformBlockStages(model, pp * chunks); };
  if (!search_) {
    return MakePlan(ctx, ctx.parallel.tp, ctx.parallel.pp, ctx.parallel.dp, ctx.parallel.virtual_stages,
                    ctx.train.micro_batch, ctx.parallel.recompute, rule);
  }
  SearchSpace space = DefaultSearchSpace(ctx);
  // Megatron-LM requires the blocks to divide evenly over the stages and chunks.
  std::vector<int> pps;
  for (int pp : space.pp) {
    if (model.NumBlocks() % (pp * space.chunks) == 0) pps.push_back(pp);
  }
  space.pp = pps;
  TESTBED_ASSIGN_OR_RETURN(SearchResult found, SearchPlans(ctx, space, rule));
  return std::move(found.plan);
}

}  // namespace testbed::megatron
