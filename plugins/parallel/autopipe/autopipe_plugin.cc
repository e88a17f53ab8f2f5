// Plugin "autopipe": AutoPipe (Liu et al., CLUSTER 2022): the balanced sub-layer pipeline
// partitioner and the micro-batch slicer; and AutoPipe-H (IEEE TC 2024), its extension to
// heterogeneous servers, whose device mapping is the partitioner `autopipe_h`.
#include "autopipe_h_partitioner.h"
#include "autopipe_partitioner.h"
#include "slicer_scheduler.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::autopipe {
namespace {

absl::StatusOr<std::unique_ptr<Partitioner>> MakePartitioner(const ParamSet& p) {
  AutoPipeOptions o;
  TESTBED_ASSIGN_OR_RETURN(o.search, p.Get<bool>("search"));
  TESTBED_ASSIGN_OR_RETURN(o.heuristic, p.Get<bool>("heuristic"));
  TESTBED_ASSIGN_OR_RETURN(const std::string granularity, p.Get<std::string>("granularity"));
  o.sublayers = granularity == "sublayer";
  TESTBED_ASSIGN_OR_RETURN(std::int64_t max_candidates, p.Get<std::int64_t>("max_candidates"));
  o.max_candidates = static_cast<int>(max_candidates);
  return std::make_unique<AutoPipePartitioner>(o);
}

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<Partitioner>(
      "autopipe", "AutoPipe: min-max sub-layer partition refined by a 1F1B-simulated search around the critical stage",
      {ParamSpec::Bool("search", false)
           .Doc("search TP, PP, DP, micro-batch size and recomputation like Megatron-LM's baseline; otherwise take them "
                "from [parallel] and [train]"),
       ParamSpec::Bool("heuristic", true).Doc("refine the dynamic programme's partition by the critical-stage search"),
       ParamSpec::Choice("granularity", "sublayer", {"sublayer", "block"})
           .Doc("partition attention and MLP sub-layers, or whole transformer blocks"),
       ParamSpec::Int("max_candidates", 2000).Range(1, 1000000).Unit("partitions")
           .Doc("most partitions the search simulates")},
      MakePartitioner));
  TESTBED_RETURN_IF_ERROR(r.Add<Partitioner>(
      "autopipe_h",
      "AutoPipe-H: heterogeneity-aware device mapping (cluster order, fastest servers first, or pipelines inside "
      "servers) with each stage's own speed in the balanced sub-layer partition",
      {}, [](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        return std::make_unique<AutoPipeHPartitioner>();
      }));
  return r.Add<Scheduler>("autopipe.slicer",
                          "1F1B with AutoPipe's micro-batch slicer: the first micro-batches split evenly to cut start-up",
                          SlicerScheduler::Params(), SlicerScheduler::Make);
}

}  // namespace
}  // namespace testbed::autopipe

TESTBED_PLUGIN("autopipe", "1.0.0", "AutoPipe: balanced sub-layer partitioning and the micro-batch slicer",
               testbed::autopipe::Register)
