// Kind `load_balancer`: in MoE training with expert parallelism, where the experts of each MoE
// layer live in each iteration (ExpertPlacement: an owner per expert and the ranks holding
// copies), from the tokens the gates route (DeepSpeed-MoE: nowhere but the owner; FasterMoE:
// shadows of the heaviest experts on every rank; Prophet and Pro-Prophet: copies where the
// tokens are). It runs in the planning chain after the partitioner (and tp_planner).
//
// Version 1 of the interface:
//   Place(input) -> the placement of one MoE layer for one iteration, given that iteration's
//   routing (`current`: what its gates chose, known after the gate), the previous iteration's
//   (`previous`: what a planner that plans iteration j+1 while iteration j runs knows) and
//   what the balancer chose for the layer last iteration. A balancer says in its README which
//   it reads. The placement names ranks of the expert-parallel group (0 .. ranks-1); the core
//   checks it.
//
// Refine, the same for every balancer (defined in the core), makes the run's routing (the
// parameters of MoeRoutingParams: tokens spread evenly, a synthetic generator with a skew and
// a drift across iterations, or a trace file), writes it into the step inputs of every
// iteration (train.steps) and MoE layer, calls Place for each, writes the placements into the
// step inputs (and the iteration with the most copies into the plan, so that static memory
// counts them), sets the plan's capacity factor, when copies are sent and in how
// many steps tokens are exchanged, and adds the figures to the plan's metrics
// (balance_degree_before / _after: standard deviation of tokens per rank without and with the
// balancer; balance_ratio: their quotient, the papers' RB; expert_copies_per_layer;
// balancer_search_s_per_call; placement_reuse_fraction; routing_synthetic and routing_traced:
// where the routing came from) and the table "moe_balance" (per
// iteration and MoE layer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/param_set.h"
#include "testbed/model_graph.h"
#include "testbed/param_spec.h"
#include "testbed/plan.h"
#include "testbed/plan_refiner.h"
#include "testbed/step_inputs.h"

namespace testbed {

inline constexpr int kLoadBalancerVersion = 1;

// Where one micro-batch's tokens of one MoE layer go on a placement: a token for an expert
// stays on its rank when the rank holds the expert (owner or copy), else goes evenly to the
// expert's holders; a rank's demand for an expert beyond `capacity` tokens (< 0: none) is
// dropped. The simulator's expansion routes with this same function.
struct TokenFlow {
  int ranks = 0;
  std::vector<double> sent;      // [src * ranks + dst]: tokens src sends dst (src == dst: stays)
  std::vector<double> computed;  // per rank: tokens its experts compute (H_i)
  double dropped = 0;

  [[nodiscard]] double At(int src, int dst) const {
    return sent[static_cast<size_t>(src) * static_cast<size_t>(ranks) + static_cast<size_t>(dst)];
  }
  // Tokens leaving `rank` for other ranks, and arriving from them.
  [[nodiscard]] double SentAway(int rank) const;
  [[nodiscard]] double Received(int rank) const;
};
[[nodiscard]] TokenFlow RouteTokens(const Routing& demand, const ExpertPlacement& placement, double capacity);

// Expert e on rank e % ranks, no copies (the plan's default).
[[nodiscard]] ExpertPlacement DefaultPlacement(int experts, int ranks);
// OK, or InvalidArgument naming the expert and the rank that is wrong (`what` says whose).
[[nodiscard]] absl::Status CheckPlacement(const ExpertPlacement& placement, int experts, int ranks,
                                          const std::string& what);
// Balance degree (Pro-Prophet): the population standard deviation of tokens per rank.
[[nodiscard]] double BalanceDegree(const std::vector<double>& tokens_per_rank) noexcept;

// What a balancer is told about one MoE layer.
struct MoeLayerShape {
  int layer = 0;      // index in the model graph
  int moe_index = 0;  // among the model's MoE layers, in order
  int experts = 0;
  int ranks = 0;  // expert-parallel degree
  int top_k = 1;
  std::int64_t hidden = 0, ffn_hidden = 0;
  std::int64_t expert_params = 0;      // parameters of one expert
  double element_bytes = 2;            // the run's bytes per activation and weight element
  double tokens_per_rank = 0;          // tokens of one micro-batch on one rank (before top_k)
  double expert_flops_per_token = 0;   // forward FLOPs of one expert on one token
  double other_flops_per_token = 0;    // forward FLOPs per token of the block's other layers (attention)
};

// The shape of MoE layer `layer` (the `moe_index`-th of the model) under `ranks`-way expert
// parallelism with `train`'s micro-batch and precision.
[[nodiscard]] MoeLayerShape MoeShapeOf(const ModelGraph& model, int layer, int moe_index, int ranks,
                                       const TrainSettings& train);

struct BalanceInput {
  const MoeLayerShape& shape;
  int iteration = 0;
  const Routing& current;               // this iteration's routing (ranks x experts)
  const Routing& previous;              // the previous iteration's (iteration 0: the current one)
  const ExpertPlacement* last = nullptr;  // this balancer's placement of the layer last iteration
};

struct BalanceDecision {
  ExpertPlacement placement;
  double predicted_s = 0;  // the layer's time under the balancer's own cost model (0: none)
  bool reused = false;     // the placement of the previous iteration kept (no search)
};

// Where routing comes from: parameters every balancer declares (MoeRoutingParams) and reads
// (MoeRoutingFrom).
struct MoeRouting {
  // "even" (every rank's tokens spread evenly over the experts), "synthetic" (below), or an
  // HDF5 trace file (routing_trace.h: dataset "tokens", iterations x MoE layers x ranks x
  // experts; iterations beyond the trace's repeat it from the start).
  std::string routing = "synthetic";
  // Synthetic: expert popularity follows a Zipf law of exponent `skew` (0: uniform) over a
  // per-layer random order of the experts; each rank's preference is the popularity times a
  // log-normal factor of deviation `rank_spread` (tokens of different ranks prefer different
  // experts); the log-popularities take a Gaussian step of deviation `drift` per iteration.
  double skew = 1.0;
  double rank_spread = 0.5;
  double drift = 0.05;
  std::uint64_t seed = 1;
  double capacity_factor = 0;  // Plan::experts.capacity_factor (0: dropless)
};
[[nodiscard]] std::vector<ParamSpec> MoeRoutingParams();
[[nodiscard]] absl::StatusOr<MoeRouting> MoeRoutingFrom(const ParamSet& params, const std::string& owner);

// The synthetic routing of one MoE layer in one iteration: ranks x experts counts summing to
// tokens_per_rank x top_k per rank, no count above tokens_per_rank (a token picks distinct
// experts). Deterministic in (routing.seed, moe_index, iteration).
[[nodiscard]] Routing SyntheticRouting(const MoeRouting& routing, int moe_index, int iteration, int ranks, int experts,
                                       double tokens_per_rank, int top_k);

class LoadBalancer : public PlanRefiner {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kLoadBalancer;

  explicit LoadBalancer(MoeRouting routing) : routing_(std::move(routing)) {}

  // InvalidArgument when the balancer cannot decide (a setting that does not suit the layer).
  [[nodiscard]] virtual absl::StatusOr<BalanceDecision> Place(const BalanceInput& input) = 0;

  // When an iteration's copies leave their owners (Plan::experts.copy_timing): kAfterStep
  // when the placement is known before the iteration, kAtLayer for a decision made after the
  // gate.
  [[nodiscard]] virtual CopyTiming CopiesSent() const noexcept { return CopyTiming::kAfterStep; }
  // In how many steps the tokens' round trip runs over `ranks` ranks (a divisor of ranks;
  // Plan::experts.exchange_steps): FasterMoE's smart schedule; 1 for one all-to-all each way.
  [[nodiscard]] virtual int ExchangeSteps(int ranks) const noexcept {
    (void)ranks;
    return 1;
  }

  [[nodiscard]] absl::Status Refine(RefineContext& ctx) final;
  [[nodiscard]] const MoeRouting& routing() const noexcept { return routing_; }

 private:
  MoeRouting routing_;
};

}  // namespace testbed
