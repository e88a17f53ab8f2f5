// Plugin "deepspeed": DeepSpeed's pipeline-parallel baselines.
#include "pipe_partitioner.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::deepspeed {
namespace {

std::vector<ParamSpec> Params() {
  return {
      ParamSpec::Bool("search", false)
          .Doc("search TP, PP, DP, micro-batch size and recomputation for the fastest plan that fits"),
      ParamSpec::Int("zero_stage", 1).Range(0, 3).Doc("ZeRO stage (DeepSpeed allows at most 1 with pipelining)"),
  };
}

template <Method kMethod>
absl::StatusOr<std::unique_ptr<Partitioner>> Make(const ParamSet& p) {
  TESTBED_ASSIGN_OR_RETURN(bool search, p.Get<bool>("search"));
  TESTBED_ASSIGN_OR_RETURN(std::int64_t zero, p.Get<std::int64_t>("zero_stage"));
  return std::make_unique<PipePartitioner>(kMethod, search, static_cast<int>(zero));
}

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<Partitioner>("deepspeed.parameters",
                                             "DeepSpeed pipeline: stages balanced by parameter count", Params(),
                                             Make<Method::kParameters>));
  return r.Add<Partitioner>("deepspeed.uniform", "DeepSpeed pipeline: stages balanced by layer count", Params(),
                            Make<Method::kUniform>);
}

}  // namespace
}  // namespace testbed::deepspeed

TESTBED_PLUGIN("deepspeed", "1.0.0", "DeepSpeed baselines: pipeline partition by parameters or layers",
               testbed::deepspeed::Register)
