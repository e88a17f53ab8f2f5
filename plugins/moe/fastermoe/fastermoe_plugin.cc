// Load balancer "fastermoe" (plugin moe_fastermoe): FasterMoE's dynamic shadowing. After
// each iteration's gate the ranks exchange their token counts and shadow (copy to every
// rank) the heaviest experts while the policy's latency falls (shadow_policy.h); tokens for
// a shadowed expert are computed where they are and its gradients reduced to the owner.
// Reads the current iteration's routing, so the shadows' weights are sent once the layer's
// gates have run (no prefetch).
#include "absl/strings/str_cat.h"
#include "shadow_policy.h"
#include "testbed/load_balancer.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::fastermoe {
namespace {

class FasterMoe final : public LoadBalancer {
 public:
  FasterMoe(MoeRouting routing, ShadowConstants k, int group) : LoadBalancer(std::move(routing)), k_(k), group_(group) {}

  absl::StatusOr<BalanceDecision> Place(const BalanceInput& in) override {
    ShadowConstants k = k_;
    if (k.d_model <= 0) k.d_model = static_cast<double>(in.shape.hidden);
    if (k.alpha <= 0) k.alpha = static_cast<double>(in.shape.ffn_hidden) / static_cast<double>(std::max<std::int64_t>(1, in.shape.hidden));
    const ShadowDecision s = DecideShadows(in.current, k);
    BalanceDecision d;
    d.placement = DefaultPlacement(in.shape.experts, in.shape.ranks);
    for (int e = 0; e < in.shape.experts; ++e) {
      if (!s.shadowed[static_cast<size_t>(e)]) continue;
      for (int r = 0; r < in.shape.ranks; ++r) {
        if (r != d.placement.owner[static_cast<size_t>(e)]) d.placement.replicas[static_cast<size_t>(e)].push_back(r);
      }
    }
    d.predicted_s = s.latency_s;
    return d;
  }
  // The shadows are chosen after the gate from this iteration's counts: their weights cannot
  // leave before the layer is reached.
  CopyTiming CopiesSent() const noexcept override { return CopyTiming::kAtLayer; }
  // The smart schedule: groups of `group_` workers, one step per group (off when 0 or when
  // the group does not divide the ranks).
  int ExchangeSteps(int ranks) const noexcept override {
    return group_ > 0 && group_ < ranks && ranks % group_ == 0 ? ranks / group_ : 1;
  }

 private:
  ShadowConstants k_;
  int group_;
};

absl::Status Register(Registry& r) {
  std::vector<ParamSpec> params = MoeRoutingParams();
  params.push_back(ParamSpec::Double("net_gbps", 50).Range(1e-6, 1e6).Unit("Gb/s").Doc("policy: network bandwidth B_net"));
  params.push_back(ParamSpec::Double("gemm_tflops", 11.5).Range(1e-6, 1e6).Unit("TFLOP/s").Doc("policy: GEMM throughput F"));
  params.push_back(ParamSpec::Double("alpha", 0).Range(0, 1e3).Unit("1")
                       .Doc("policy: FFN width over d_model (0: the model's ffn_hidden / hidden)"));
  params.push_back(ParamSpec::Double("d_model", 0).Range(0, 1e7).Unit("elements")
                       .Doc("policy: feature length of the expert input (0: the model's hidden)"));
  params.push_back(ParamSpec::Double("data_bytes", 4).Range(0.5, 8).Unit("B").Doc("policy: bytes per element"));
  params.push_back(ParamSpec::Int("smart_schedule_group", 4).Range(0, 1 << 20).Unit("ranks")
                       .Doc("smart schedule: workers per group, the all-to-all run group by group so that expert "
                            "compute overlaps the next exchange (public implementation: 4); 0: off"));
  return r.Add<LoadBalancer>(
      "fastermoe", "FasterMoE: dynamic shadowing of the heaviest experts on every rank while the modelled latency falls",
      std::move(params), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<LoadBalancer>> {
        TESTBED_ASSIGN_OR_RETURN(MoeRouting routing, MoeRoutingFrom(p, "fastermoe"));
        ParamReader read(p, "fastermoe");
        ShadowConstants k;
        k.net_gbps = read.Get<double>("net_gbps");
        k.gemm_tflops = read.Get<double>("gemm_tflops");
        k.alpha = read.Get<double>("alpha");
        k.d_model = read.Get<double>("d_model");
        k.data_bytes = read.Get<double>("data_bytes");
        const int group = static_cast<int>(read.Get<std::int64_t>("smart_schedule_group"));
        TESTBED_RETURN_IF_ERROR(read.status());
        return std::make_unique<FasterMoe>(std::move(routing), k, group);
      });
}

}  // namespace
}  // namespace testbed::fastermoe

TESTBED_PLUGIN("moe_fastermoe", "1.0.0", "FasterMoE's dynamic shadowing (load balancer)", testbed::fastermoe::Register)
