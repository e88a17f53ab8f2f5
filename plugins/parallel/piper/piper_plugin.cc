// Plugin "piper": a Piper-style pipeline planner (Tarnawski et al., NeurIPS 2021), the second
// baseline of AutoPipe's partition-balance and planning-time comparison.
#include "piper_partitioner.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::piper {
namespace {

absl::Status Register(Registry& r) {
  return r.Add<Partitioner>(
      "piper", "Piper-style planner: min-max dynamic programme over whole layers with per-stage recomputation and memory",
      {ParamSpec::Bool("search", false)
           .Doc("search TP, PP, DP and micro-batch size; otherwise take them from [parallel] and [train]")},
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Partitioner>> {
        TESTBED_ASSIGN_OR_RETURN(bool search, p.Get<bool>("search"));
        return std::make_unique<PiperPartitioner>(search);
      });
}

}  // namespace
}  // namespace testbed::piper

TESTBED_PLUGIN("piper", "1.0.0", "Piper-style pipeline planner (baseline)", testbed::piper::Register)
