// Plugin "megatron": Megatron-LM's baseline planning and schedules.
#include "schedulers.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"
#include "uniform_partitioner.h"
#include "uniform_tp.h"

namespace testbed::megatron {
namespace {

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<Partitioner>(
      "megatron.uniform",
      "Megatron-LM: transformer blocks split evenly over pipeline stages and chunks (or Megatron-Core's uneven split)",
      {ParamSpec::Bool("search", false)
           .Doc("search TP, PP, DP, micro-batch size and recomputation for the fastest plan that fits; "
                "otherwise take them from [parallel] and [train]"),
       ParamSpec::Int("first_stage_blocks", -1).Range(-1, 1 << 20)
           .Unit("blocks")
           .Doc("transformer blocks on the first pipeline stage, over its chunks (Megatron-Core's "
                "decoder_first_pipeline_num_layers); -1: an even share"),
       ParamSpec::Int("last_stage_blocks", -1).Range(-1, 1 << 20)
           .Unit("blocks")
           .Doc("transformer blocks on the last pipeline stage (decoder_last_pipeline_num_layers); -1: an even share"),
       ParamSpec::Bool("embedding_as_block", false)
           .Doc("the embedding takes one block's place in the split (account_for_embedding_in_pipeline_split)"),
       ParamSpec::Bool("head_as_block", false)
           .Doc("the output layer and loss take one block's place (account_for_loss_in_pipeline_split)"),
       ParamSpec::Bool("distributed_optimizer", false)
           .Doc("shard optimizer state over the data-parallel ranks, gradients reduce-scattered and weights "
                "all-gathered after the step (Megatron's distributed optimizer: zero_stage 1 at least)")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        TESTBED_ASSIGN_OR_RETURN(bool search, p.Get<bool>("search"));
        UnevenSplit split;
        TESTBED_ASSIGN_OR_RETURN(std::int64_t first, p.Get<std::int64_t>("first_stage_blocks"));
        TESTBED_ASSIGN_OR_RETURN(std::int64_t last, p.Get<std::int64_t>("last_stage_blocks"));
        split.first_stage_blocks = static_cast<int>(first);
        split.last_stage_blocks = static_cast<int>(last);
        TESTBED_ASSIGN_OR_RETURN(split.embedding_as_block, p.Get<bool>("embedding_as_block"));
        TESTBED_ASSIGN_OR_RETURN(split.head_as_block, p.Get<bool>("head_as_block"));
        TESTBED_ASSIGN_OR_RETURN(bool distributed, p.Get<bool>("distributed_optimizer"));
        return std::make_unique<UniformPartitioner>(search, split, distributed);
      }));
  TESTBED_RETURN_IF_ERROR(r.Add<TpPlanner>(
      "megatron.uniform_tp", "Megatron-LM: one tensor-parallel degree for every layer, the fastest that fits",
      {ParamSpec::Int("degree", 0).Range(0, 1 << 20)
           .Unit("devices")
           .Doc("the degree; 0: each power of two dividing the stage's devices simulated, the fastest that fits taken")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<TpPlanner>> {
        TESTBED_ASSIGN_OR_RETURN(std::int64_t degree, p.Get<std::int64_t>("degree"));
        return std::make_unique<UniformTp>(static_cast<int>(degree));
      }));
  TESTBED_RETURN_IF_ERROR(r.Add<Scheduler>(
      "1f1b", "1F1B (PipeDream-Flush), Megatron-LM's default pipeline schedule", MegatronScheduleParams(),
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
        TESTBED_ASSIGN_OR_RETURN(MegatronOptions o, MegatronOptionsFrom(p));
        return std::make_unique<OneFOneB>(o);
      }));
  std::vector<ParamSpec> interleaved = MegatronScheduleParams();
  interleaved.push_back(ParamSpec::Int("microbatch_group", 0)
                            .Range(0, 1 << 20)
                            .Unit("micro-batches")
                            .Doc("micro-batches each chunk runs before the next chunk's (Megatron-Core's "
                                 "microbatch_group_size_per_vp_stage): from the pipeline depth to the micro-batch "
                                 "count, the last group none or at least the depth; 0: the depth, or where the count "
                                 "is not a multiple of it the smallest group accepted"));
  return r.Add<Scheduler>(
      "interleaved_1f1b", "Megatron-LM's interleaved 1F1B over virtual stages ([parallel] virtual_stages)",
      interleaved, [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
        TESTBED_ASSIGN_OR_RETURN(MegatronOptions o, MegatronOptionsFrom(p));
        TESTBED_ASSIGN_OR_RETURN(std::int64_t group, p.Get<std::int64_t>("microbatch_group"));
        return std::make_unique<Interleaved>(o, static_cast<int>(group));
      });
}

}  // namespace
}  // namespace testbed::megatron

TESTBED_PLUGIN("megatron", "1.0.0", "Megatron-LM baselines: uniform partition, 1F1B and interleaved schedules",
               testbed::megatron::Register)
