// Load balancer "deepspeed_moe" (plugin moe_deepspeed): pure expert parallelism, as in
// DeepSpeed-MoE: expert e on rank e % ranks, no copies; every token goes to its expert's
// rank. The baseline the balancers are measured against; it still makes the run's routing
// (the parameters every balancer shares).
#include "testbed/load_balancer.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::deepspeed_moe {
namespace {

class NoBalancing final : public LoadBalancer {
 public:
  using LoadBalancer::LoadBalancer;

  absl::StatusOr<BalanceDecision> Place(const BalanceInput& in) override {
    BalanceDecision d;
    d.placement = DefaultPlacement(in.shape.experts, in.shape.ranks);
    return d;
  }
};

absl::Status Register(Registry& r) {
  return r.Add<LoadBalancer>("deepspeed_moe", "DeepSpeed-MoE: expert parallelism without balancing (expert e on rank e % ranks)",
                             MoeRoutingParams(),
                             [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<LoadBalancer>> {
                               TESTBED_ASSIGN_OR_RETURN(MoeRouting routing, MoeRoutingFrom(p, "deepspeed_moe"));
                               return std::make_unique<NoBalancing>(std::move(routing));
                             });
}

}  // namespace
}  // namespace testbed::deepspeed_moe

TESTBED_PLUGIN("moe_deepspeed", "1.0.0", "DeepSpeed-MoE expert parallelism without balancing (load balancer baseline)",
               testbed::deepspeed_moe::Register)
