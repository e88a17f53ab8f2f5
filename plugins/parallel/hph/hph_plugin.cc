// Plugin "hph": HPH (hybrid parallelism on heterogeneous clusters): the partitioner (topology
// designer, throughput-maximising and recomputation-aware layer partition) and the
// recomputation-aware schedule.
#include "hph_partitioner.h"
#include "hph_scheduler.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::hph {
namespace {

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<Partitioner>(
      "hph",
      "HPH: pipeline depth searched; topology designer (stage-major or pipeline-major, the least communication); "
      "layers split by each stage's slowest device and smallest memory, recomputing where only that fits",
      {ParamSpec::Int("finalists", 4).Range(1, 64).Doc("best plans by the estimate handed to the simulator"),
       ParamSpec::Bool("design_topology", true).Doc("false: every stage's replicas side by side (stage-major)")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        HphOptions o;
        TESTBED_ASSIGN_OR_RETURN(std::int64_t f, p.Get<std::int64_t>("finalists"));
        o.finalists = static_cast<int>(f);
        TESTBED_ASSIGN_OR_RETURN(o.design_topology, p.Get<bool>("design_topology"));
        return std::make_unique<HphPartitioner>(o);
      }));
  std::vector<ParamSpec> params;
  for (ParamSpec& p : ExpandOptionParams()) {
    if (p.name() != "recompute_after_gradient") params.push_back(std::move(p));  // its recomputes never wait
  }
  return r.Add<Scheduler>("hph", "HPH's recomputation-aware 1F1B: each recomputation moved into the bubble before "
                                 "its backward",
                          params, [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
                            TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
                            return std::make_unique<HphScheduler>(o);
                          });
}

}  // namespace
}  // namespace testbed::hph

TESTBED_PLUGIN("hph", "1.0.0", "HPH: heterogeneous data-parallel pipelines with recomputation in bubbles",
               testbed::hph::Register)
