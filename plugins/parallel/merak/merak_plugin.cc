// Plugin "merak": Merak (Lai et al., TPDS 2023): the automatic 3D-parallel partitioner with
// stage-aware recomputation and sub-pipelined tensor parallelism, and the shifted critical
// path pipeline schedule.
#include "merak_partitioner.h"
#include "scp_scheduler.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::merak {
namespace {

std::vector<ParamSpec> PartitionerParams() {
  return {
      ParamSpec::Bool("search", true)
          .Doc("choose TP, PP, DP and the micro-batch size for the cluster; false: take them from [parallel] and [train]"),
      ParamSpec::Choice("stages", "proxy_graph", {"proxy_graph", "uniform"})
          .Doc("stage split: balanced on the proxy graph's per-layer costs, or Megatron-LM's uniform blocks"),
      ParamSpec::Choice("recompute", "stage_aware", {"stage_aware", "uniform", "none"})
          .Doc("stage-aware ratios from the smallest r0 that fits, the same ratio on every stage, or none"),
      ParamSpec::Int("tp_chunks", 2).Range(1, 4)
          .Doc("sub-pipelined tensor parallelism: parts of a micro-batch inside a block (1: off)"),
      ParamSpec::Bool("shifted_critical_path", true)
          .Doc("plan for the shifted critical path schedule: stage P-2 takes stage P-3's ratio"),
      ParamSpec::Int("zero_stage", 1).Range(0, 1)
          .Doc("ZeRO stage 1 shards the optimizer state over data-parallel ranks (DeepSpeed's engine, which Merak's runtime extends)"),
  };
}

absl::StatusOr<std::unique_ptr<Partitioner>> MakePartitioner(const ParamSet& p) {
  MerakOptions o;
  TESTBED_ASSIGN_OR_RETURN(o.search, p.Get<bool>("search"));
  TESTBED_ASSIGN_OR_RETURN(const std::string stages, p.Get<std::string>("stages"));
  o.proxy_graph_stages = stages == "proxy_graph";
  TESTBED_ASSIGN_OR_RETURN(const std::string recompute, p.Get<std::string>("recompute"));
  o.recompute = recompute == "uniform" ? RecomputePolicy::kUniform
                : recompute == "none"  ? RecomputePolicy::kNone
                                       : RecomputePolicy::kStageAware;
  TESTBED_ASSIGN_OR_RETURN(std::int64_t chunks, p.Get<std::int64_t>("tp_chunks"));
  if (chunks == 3) return absl::InvalidArgumentError("merak: tp_chunks must be 1, 2 or 4");
  o.tp_chunks = static_cast<int>(chunks);
  TESTBED_ASSIGN_OR_RETURN(o.shifted_critical_path, p.Get<bool>("shifted_critical_path"));
  TESTBED_ASSIGN_OR_RETURN(std::int64_t zero, p.Get<std::int64_t>("zero_stage"));
  o.zero_stage = static_cast<int>(zero);
  return std::make_unique<MerakPartitioner>(o);
}

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<Partitioner>(
      "merak", "Merak: automatic 3D parallelism, proxy-graph stages, stage-aware recomputation, sub-pipelined TP",
      PartitionerParams(), MakePartitioner));
  return r.Add<Scheduler>("merak.shifted_critical_path",
                          "Merak's shifted critical path 1F1B (recomputation off the critical path; needs >= 4 "
                          "micro-batches)",
                          ShiftedCriticalPathScheduler::Params(), ShiftedCriticalPathScheduler::Make);
}

}  // namespace
}  // namespace testbed::merak

TESTBED_PLUGIN("merak", "1.0.0", "Merak: automated 3D parallelism and the shifted critical path schedule",
               testbed::merak::Register)
