// LoadBalancer::Refine (testbed/load_balancer.h): the planning chain's step shared by every
// load balancer. Makes each iteration's routing of every MoE layer (even, synthetic or from a
// trace), asks the balancer for the layer's placement, checks it, and writes routing and
// placement into the step inputs, with the balance figures as planner metrics and a table.
#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "testbed/device_spec.h"
#include "testbed/load_balancer.h"
#include "testbed/routing_trace.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

int Copies(const ExpertPlacement& p) {
  int n = 0;
  for (const auto& r : p.replicas) n += static_cast<int>(r.size());
  return n;
}

double MaxOf(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

// Where the routing of each (iteration, MoE layer) comes from.
class RoutingMaker {
 public:
  static absl::StatusOr<RoutingMaker> Make(const MoeRouting& r, int moe_layers, int ranks, int experts) {
    RoutingMaker m(r);
    if (r.routing == "even" || r.routing == "synthetic") return m;
    TESTBED_ASSIGN_OR_RETURN(RoutingTrace t, ReadRoutingTrace(r.routing));
    const std::string where = absl::StrCat(r.routing, ", dataset \"tokens\"");
    if (t.layers != moe_layers || t.ranks != ranks || t.experts != experts) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", t.iterations, " x ", t.layers, " x ", t.ranks, " x ",
                                                     t.experts, " (iterations x MoE layers x ranks x experts); the run has ",
                                                     moe_layers, " MoE layers, ", ranks, " expert-parallel ranks and ",
                                                     experts, " experts per layer"));
    }
    m.trace_ = std::move(t);
    return m;
  }

  // Tokens of one micro-batch: `tokens_per_rank` per rank, times top_k.
  [[nodiscard]] Routing At(int iteration, int moe_index, int ranks, int experts, double tokens_per_rank, int top_k) const {
    if (trace_) return trace_->Slice(iteration % trace_->iterations, moe_index);
    if (r_.routing == "synthetic") return SyntheticRouting(r_, moe_index, iteration, ranks, experts, tokens_per_rank, top_k);
    Routing even{ranks, experts, {}};
    even.tokens.assign(static_cast<size_t>(ranks) * static_cast<size_t>(experts),
                       tokens_per_rank * top_k / std::max(1, experts));
    return even;
  }
  [[nodiscard]] bool traced() const noexcept { return trace_.has_value(); }

 private:
  explicit RoutingMaker(MoeRouting r) : r_(std::move(r)) {}
  MoeRouting r_;
  std::optional<RoutingTrace> trace_;
};

struct BalanceTable {
  std::vector<std::int64_t> iteration, layer, copies, reused;
  std::vector<double> before, after, max_before, max_after, predicted, dropped;

  Table Make() {
    Table t;
    t.name = "moe_balance";
    t.columns = {{"iteration", "", iteration},
                 {"layer", "", layer},
                 {"balance_degree_before", "tokens", before},
                 {"balance_degree_after", "tokens", after},
                 {"max_rank_tokens_before", "tokens", max_before},
                 {"max_rank_tokens_after", "tokens", max_after},
                 {"expert_copies", "copies", copies},
                 {"dropped_tokens", "tokens", dropped},
                 {"predicted_s", "s", predicted},
                 {"reused", "1", reused}};
    return t;
  }
};

}  // namespace

MoeLayerShape MoeShapeOf(const ModelGraph& model, int l, int moe_index, int ranks, const TrainSettings& train) {
  const Layer& layer = model.layers[static_cast<size_t>(l)];
  MoeLayerShape shape;
  shape.layer = l;
  shape.moe_index = moe_index;
  shape.experts = static_cast<int>(layer.experts);
  shape.ranks = ranks;
  shape.top_k = static_cast<int>(layer.top_k);
  shape.hidden = layer.hidden;
  shape.ffn_hidden = layer.ffn_hidden;
  shape.expert_params = layer.expert_params;
  shape.element_bytes = ElementBytes(StoragePrecision(train.precision));
  shape.tokens_per_rank = static_cast<double>(train.micro_batch) * static_cast<double>(layer.seq_len);
  shape.expert_flops_per_token = (layer.swiglu ? 6.0 : 4.0) * static_cast<double>(layer.hidden) * static_cast<double>(layer.ffn_hidden);
  for (const Layer& other : model.layers) {
    if (other.block == layer.block && &other != &layer && layer.seq_len > 0) {
      shape.other_flops_per_token += other.fwd_flops_per_sample / static_cast<double>(layer.seq_len);
    }
  }
  return shape;
}

absl::Status LoadBalancer::Refine(RefineContext& ctx) {
  const ModelGraph& model = ctx.planning.model;
  const TrainSettings& train = ctx.planning.train;
  Plan& plan = ctx.plan;
  std::vector<int> moe;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    if (model.layers[l].kind == LayerKind::kMoe && model.layers[l].experts > 0) moe.push_back(static_cast<int>(l));
  }
  if (moe.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("a load balancer needs a MoE model; model '", model.shape.name,
                                                   "' has no MoE layer (family \"", model.shape.family, "\")"));
  }
  const int ranks = plan.experts.degree;
  if (ranks < 2) {
    return absl::InvalidArgumentError(
        "a load balancer needs expert parallelism; the plan's expert-parallel degree is 1: set [parallel] ep (e.g. to "
        "the number of devices)");
  }
  const int experts = static_cast<int>(model.layers[static_cast<size_t>(moe.front())].experts);
  TESTBED_ASSIGN_OR_RETURN(const RoutingMaker maker, RoutingMaker::Make(routing_, static_cast<int>(moe.size()), ranks, experts));
  plan.experts.capacity_factor = routing_.capacity_factor;
  plan.experts.copy_timing = CopiesSent();
  const int exchange_steps = ExchangeSteps(ranks);
  if (exchange_steps < 1 || ranks % exchange_steps != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the balancer asks for a token exchange in ", exchange_steps,
                                                   " steps over ", ranks, " ranks; expected a divisor of ", ranks));
  }
  plan.experts.exchange_steps = exchange_steps;
  const int steps = static_cast<int>(std::max<std::int64_t>(1, train.steps));
  BalanceTable table;
  double sum_before = 0, sum_after = 0, search_s = 0, calls = 0, reused = 0, copies = 0, predicted = 0;
  for (size_t mi = 0; mi < moe.size(); ++mi) {
    const int l = moe[mi];
    const Layer& layer = model.layers[static_cast<size_t>(l)];
    const MoeLayerShape shape = MoeShapeOf(model, l, static_cast<int>(mi), ranks, train);
    if (static_cast<int>(layer.experts) != experts) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, " (", layer.name, ") has ", layer.experts,
                                                     " experts, the first MoE layer ", experts,
                                                     "; a load balancer needs every MoE layer to have the same number"));
    }
    const double cap = routing_.capacity_factor > 0
                           ? routing_.capacity_factor * shape.tokens_per_rank * shape.top_k / std::max(1, experts)
                           : -1;
    const ExpertPlacement base = plan.PlacementOf(l, layer.experts);
    std::optional<ExpertPlacement> last, most;
    Routing prev;
    for (int t = 0; t < steps; ++t) {
      Routing cur = maker.At(t, static_cast<int>(mi), ranks, experts, shape.tokens_per_rank, shape.top_k);
      const BalanceInput in{shape, t, cur, t == 0 ? cur : prev, last ? &*last : nullptr};
      const auto t0 = std::chrono::steady_clock::now();
      TESTBED_ASSIGN_OR_RETURN(BalanceDecision d, Place(in));
      search_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      TESTBED_RETURN_IF_ERROR(
          CheckPlacement(d.placement, experts, ranks, absl::StrCat("layer ", l, " (", layer.name, "), iteration ", t)));
      const TokenFlow without = RouteTokens(cur, base, cap), with = RouteTokens(cur, d.placement, cap);
      const double b = BalanceDegree(without.computed), a = BalanceDegree(with.computed);
      sum_before += b;
      sum_after += a;
      calls += 1;
      reused += d.reused ? 1 : 0;
      copies += Copies(d.placement);
      predicted += d.predicted_s;
      table.iteration.push_back(t);
      table.layer.push_back(l);
      table.before.push_back(b);
      table.after.push_back(a);
      table.max_before.push_back(MaxOf(without.computed));
      table.max_after.push_back(MaxOf(with.computed));
      table.copies.push_back(Copies(d.placement));
      table.dropped.push_back(with.dropped);
      table.predicted.push_back(d.predicted_s);
      table.reused.push_back(d.reused ? 1 : 0);
      if (!most || Copies(d.placement) > Copies(*most)) most = d.placement;
      StepInput& step = ctx.inputs.Mutable(t);
      step.routing[l] = cur;
      step.placement[l] = d.placement;
      last = std::move(d.placement);
      prev = std::move(cur);
    }
    // Static memory counts the copies of the iteration that holds the most.
    plan.experts.placement[l] = *most;
  }
  MetricSet& m = plan.planner_metrics;
  const double n = std::max(1.0, calls);
  m.Add("balance_degree_before", sum_before / n, "tokens", Better::kLower);
  m.Add("balance_degree_after", sum_after / n, "tokens", Better::kLower);
  // RB: the degrees' quotient (absent when the balancer evens every rank exactly).
  if (sum_after > 0 || sum_before == 0) m.Add("balance_ratio", sum_after > 0 ? sum_before / sum_after : 1.0, "1", Better::kHigher);
  m.Add("expert_copies_per_layer", copies / n, "copies", Better::kNeither);
  m.Add("balancer_search_s_per_call", search_s / n, "s", Better::kLower);
  m.Add("placement_reuse_fraction", reused / n, "1", Better::kNeither);
  if (predicted > 0) m.Add("balancer_predicted_layer_s", predicted / n, "s", Better::kLower);
  m.Add("routing_traced", maker.traced() ? 1.0 : 0.0, "1", Better::kNeither);
  m.Add("routing_synthetic", routing_.routing == "synthetic" ? 1.0 : 0.0, "1", Better::kNeither);
  plan.planner_tables.push_back(table.Make());
  return absl::OkStatus();
}

}  // namespace testbed
