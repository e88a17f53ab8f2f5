// Plugin "dapple": a DAPPLE-style pipeline planner (Fan et al., PPoPP 2021), the baseline of
// AutoPipe's partition-balance and planning-time comparison.
#include "dapple_partitioner.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::dapple {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Partitioner>(
      "dapple", "DAPPLE-style planner: recursive split of whole layers scored by DAPPLE's pivot-stage latency model",
      {ParamSpec::Bool("search", false)
           .Doc("search TP, PP, DP, micro-batch size and recomputation; otherwise take them from [parallel] and [train]")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        TESTBED_ASSIGN_OR_RETURN(bool search, p.Get<bool>("search"));
        return std::make_unique<DapplePartitioner>(search);
      });
}

}  // namespace
}  // namespace testbed::dapple

TESTBED_PLUGIN("dapple", "1.0.0", "DAPPLE-style pipeline planner (baseline)", testbed::dapple::Register)
