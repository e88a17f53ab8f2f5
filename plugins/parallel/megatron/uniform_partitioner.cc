#include "uniform_partitioner.h"

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::megatron {

absl::StatusOr<std::vector<StageSpec>> UniformBlockStages(const ModelGraph& model, int pp, int chunks) {
  const int parts = pp * chunks;
  // Group layer indices by transformer block; embedding and head attach to the ends.
  std::vector<int> block_start;
  for (int i = 0; i < static_cast<int>(model.layers.size()); ++i) {
    const Layer& l = model.layers[static_cast<size_t>(i)];
    if (l.block >= 0 && (block_start.empty() || model.layers[static_cast<size_t>(block_start.back())].block != l.block)) {
      block_start.push_back(i);
    }
  }
  const int blocks = static_cast<int>(block_start.size());
  if (blocks < parts) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model.shape.name, "' has ", blocks,
                                                   " blocks, fewer than pp x virtual stages = ", parts));
  }
  std::vector<StageSpec> stages = UniformStages(blocks, parts);
  for (size_t i = 0; i < stages.size(); ++i) {
    const int first_block = stages[i].first_layer, end_block = stages[i].end_layer;
    stages[i].first_layer = i == 0 ? 0 : block_start[static_cast<size_t>(first_block)];
    stages[i].end_layer = i + 1 == stages.size() ? static_cast<int>(model.layers.size())
                                                 : block_start[static_cast<size_t>(end_block)];
  }
  return stages;
}

absl::StatusOr<Plan> UniformPlan(const PlanningContext& ctx, int tp, int pp, int dp, int chunks,
                                 std::int64_t micro_batch) {
  const int devices = ctx.cluster.num_devices();
  if (dp == 0) {
    if (devices % (tp * pp) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tp x pp = ", tp * pp, " does not divide the cluster's ", devices,
                                                     " devices"));
    }
    dp = devices / (tp * pp);
  }
  if (tp * pp * dp > devices) {
    return absl::InvalidArgumentError(absl::StrCat("tp x pp x dp = ", tp * pp * dp, " exceeds the cluster's ", devices,
                                                   " devices"));
  }
  for (const Layer& l : ctx.model.layers) {
    if (l.heads > 0 && l.heads % tp != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tp ", tp, " does not divide the model's ", l.heads, " heads"));
    }
  }
  Plan plan;
  plan.tp = tp;
  plan.pp = pp;
  plan.dp = dp;
  plan.virtual_stages = chunks;
  plan.micro_batch = micro_batch;
  TrainSettings train = ctx.train;
  train.micro_batch = micro_batch;
  TESTBED_ASSIGN_OR_RETURN(plan.micro_batches, MicroBatchesPerReplica(train, dp));
  plan.recompute = ctx.parallel.recompute;
  plan.sequence_parallel = ctx.parallel.sequence_parallel && tp > 1;
  plan.zero_stage = ctx.parallel.zero_stage;
  TESTBED_ASSIGN_OR_RETURN(plan.stages, UniformBlockStages(ctx.model, pp, chunks));
  if (plan.recompute == RecomputeMode::kFull) {
    for (StageSpec& s : plan.stages) s.recompute_layers = s.end_layer - s.first_layer;
  }
  plan.device_map = DefaultDeviceMap(tp, pp, dp);
  return plan;
}

absl::StatusOr<Plan> UniformPartitioner::Partition(const PlanningContext& ctx) {
  return UniformPlan(ctx, ctx.parallel.tp, ctx.parallel.pp, ctx.parallel.dp, ctx.parallel.virtual_stages,
                     ctx.train.micro_batch);
}

}  // namespace testbed::megatron
