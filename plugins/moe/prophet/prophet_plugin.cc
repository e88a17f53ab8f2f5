// Load balancers "pro_prophet" and "prophet" (plugin moe_prophet): expert copies placed
// where the tokens are, planned for each iteration from the previous iteration's routing
// (the planner of iteration j+1 runs while iteration j's all-to-all does) with the cost
// model of cost_model.h. Pro-Prophet reuses a plan while the routing it was made from stays
// close to the newest one (locality); Prophet plans every iteration.
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "search.h"
#include "testbed/load_balancer.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::prophet {
namespace {

// Relative L1 distance of the experts' token totals of two routings.
double Change(const Routing& a, const Routing& b) {
  double diff = 0, total = 0;
  for (int e = 0; e < a.experts; ++e) {
    double x = 0, y = 0;
    for (int r = 0; r < a.ranks; ++r) {
      x += a.At(r, e);
      y += b.At(r, e);
    }
    diff += std::abs(x - y);
    total += y;
  }
  return total > 0 ? diff / total : 0.0;
}

// What both planners share: the cost model's constants, and the copies' timing that follows
// from the scheduler (a layer's copies in two halves during the previous MoE block; without
// the scheduler, the planner-only ablation, when the layer is reached).
class CostModelBalancer : public LoadBalancer {
 public:
  CostModelBalancer(MoeRouting routing, CostConstants k) : LoadBalancer(std::move(routing)), k_(k) {}
  CopyTiming CopiesSent() const noexcept override {
    return k_.scheduler ? CopyTiming::kPreviousBlock : CopyTiming::kAtLayer;
  }

 protected:
  CostConstants k_;
};

class ProProphet final : public CostModelBalancer {
 public:
  ProProphet(MoeRouting routing, CostConstants k, GreedyOptions g, double replan)
      : CostModelBalancer(std::move(routing), k), g_(g), replan_(replan) {}

  absl::StatusOr<BalanceDecision> Place(const BalanceInput& in) override {
    BalanceDecision d;
    auto it = planned_from_.find(in.shape.layer);
    if (in.last != nullptr && it != planned_from_.end() && Change(it->second, in.previous) <= replan_) {
      d.placement = *in.last;
      d.reused = true;
      FlowState f(in.previous, d.placement);
      d.predicted_s = Cost(in.shape, k_, f).total_s;
      return d;
    }
    const SearchResult s = ProProphetSearch(in.shape, k_, in.previous, g_);
    planned_from_[in.shape.layer] = in.previous;
    d.placement = s.placement;
    d.predicted_s = s.cost.total_s;
    return d;
  }
 private:
  GreedyOptions g_;
  double replan_;
  std::map<int, Routing> planned_from_;  // by layer: the routing the layer's plan was searched on
};

class Prophet final : public CostModelBalancer {
 public:
  Prophet(MoeRouting routing, CostConstants k, int max_moves)
      : CostModelBalancer(std::move(routing), k), max_moves_(max_moves) {}

  absl::StatusOr<BalanceDecision> Place(const BalanceInput& in) override {
    const int moves = max_moves_ > 0 ? max_moves_ : 2 * in.shape.experts;
    const SearchResult s = ProphetSearch(in.shape, k_, in.previous, moves);
    BalanceDecision d;
    d.placement = s.placement;
    d.predicted_s = s.cost.total_s;
    return d;
  }
 private:
  int max_moves_;
};

std::vector<ParamSpec> CostParams(std::vector<ParamSpec> own) {
  std::vector<ParamSpec> p = MoeRoutingParams();
  p.push_back(ParamSpec::Double("trans_gbps", 15).Range(1e-6, 1e6).Unit("Gb/s")
                  .Doc("cost model: bandwidth of expert parameter and gradient transfers (public implementation: 15)"));
  p.push_back(ParamSpec::Double("compute_tflops", 35.7).Range(1e-6, 1e6).Unit("TFLOP/s")
                  .Doc("cost model: compute throughput (public implementation: 35.7)"));
  p.push_back(ParamSpec::Double("data_bytes", 4).Range(0.5, 8).Unit("B")
                  .Doc("cost model: bytes per element of activations, weights and gradients (public implementation: 4)"));
  p.push_back(ParamSpec::Bool("scheduler", true)
                  .Doc("the block-wise scheduler: the cost model counts only the transfers' exposed parts and the "
                       "copies are sent ahead of their layer (false: the planner-only ablation, transfers counted in "
                       "full and sent when the layer is reached)"));
  p.insert(p.end(), own.begin(), own.end());
  return p;
}

absl::StatusOr<CostConstants> CostFrom(ParamReader& read) {
  CostConstants k;
  k.trans_gbps = read.Get<double>("trans_gbps");
  k.compute_tflops = read.Get<double>("compute_tflops");
  k.data_bytes = read.Get<double>("data_bytes");
  k.scheduler = read.Get<bool>("scheduler");
  TESTBED_RETURN_IF_ERROR(read.status());
  return k;
}

absl::Status Register(Registry& r) {
  TESTBED_RETURN_IF_ERROR(r.Add<LoadBalancer>(
      "pro_prophet", "Pro-Prophet: locality-based greedy placement of expert copies with a cost model, plans reused",
      CostParams({
          ParamSpec::Double("alpha", 3).Range(0, 1e6).Unit("1")
              .Doc("search stops when max - min tokens per rank < alpha x (tokens one rank routes) / experts"),
          ParamSpec::Int("max_excluded", 1).Range(0, 1 << 20).Unit("ranks")
              .Doc("most ranks left without a copy of a copied expert (public implementation: 1)"),
          ParamSpec::Double("replan_threshold", 0.1).Range(0, 2).Unit("1")
              .Doc("reuse the layer's plan while the experts' token totals moved by at most this relative L1 "
                   "distance since it was made (0: plan every iteration)"),
      }),
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<LoadBalancer>> {
        TESTBED_ASSIGN_OR_RETURN(MoeRouting routing, MoeRoutingFrom(p, "pro_prophet"));
        ParamReader read(p, "pro_prophet");
        TESTBED_ASSIGN_OR_RETURN(CostConstants k, CostFrom(read));
        GreedyOptions g;
        g.alpha = read.Get<double>("alpha");
        g.max_excluded = static_cast<int>(read.Get<std::int64_t>("max_excluded"));
        const double replan = read.Get<double>("replan_threshold");
        TESTBED_RETURN_IF_ERROR(read.status());
        return std::make_unique<ProProphet>(std::move(routing), k, g, replan);
      }));
  return r.Add<LoadBalancer>(
      "prophet", "Prophet: fine-grained placement of expert copies, one copy at a time by a cost model, every iteration",
      CostParams({ParamSpec::Int("max_moves", 0).Range(0, 1 << 24).Unit("copies")
                      .Doc("most copies added per layer and iteration (0: twice the experts)")}),
      [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<LoadBalancer>> {
        TESTBED_ASSIGN_OR_RETURN(MoeRouting routing, MoeRoutingFrom(p, "prophet"));
        ParamReader read(p, "prophet");
        TESTBED_ASSIGN_OR_RETURN(CostConstants k, CostFrom(read));
        const int moves = static_cast<int>(read.Get<std::int64_t>("max_moves"));
        TESTBED_RETURN_IF_ERROR(read.status());
        return std::make_unique<Prophet>(std::move(routing), k, moves);
      });
}

}  // namespace
}  // namespace testbed::prophet

TESTBED_PLUGIN("moe_prophet", "1.0.0", "Prophet and Pro-Prophet: MoE expert placement by a cost model (load balancers)",
               testbed::prophet::Register)
