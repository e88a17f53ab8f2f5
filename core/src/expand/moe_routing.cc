#include "expand/moe_routing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "testbed/load_balancer.h"

namespace testbed::expand {

ExpertPlacement PlacementFor(const Expansion& e, int iteration, int layer) {
  const auto& step = e.Inputs(iteration).placement;
  if (auto it = step.find(layer); it != step.end()) return it->second;
  return e.plan.PlacementOf(layer, e.model.layers[static_cast<size_t>(layer)].experts);
}

absl::StatusOr<TokenExchange> ExchangeFor(const Expansion& e, const Lane& lane, int layer, std::int64_t micro_batch,
                                          int ranks) {
  const Layer& l = e.model.layers[static_cast<size_t>(layer)];
  const int experts = static_cast<int>(l.experts);
  const ExpertPlacement place = PlacementFor(e, lane.iteration, layer);
  if (static_cast<int>(place.owner.size()) != experts) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " (", l.name, "): the expert placement of iteration ",
                                                   lane.iteration, " lists ", place.owner.size(), " experts; the layer has ",
                                                   experts));
  }
  const double tokens_per_rank = static_cast<double>(micro_batch) * lane.fraction * static_cast<double>(l.seq_len);
  const auto& routing = e.Inputs(lane.iteration).routing;
  const Routing* r = nullptr;
  if (auto it = routing.find(layer); it != routing.end()) {
    r = &it->second;
    if (r->ranks != ranks || r->experts != experts || r->tokens.size() != static_cast<size_t>(ranks) * static_cast<size_t>(experts)) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " (", l.name, "): the routing of iteration ", lane.iteration,
                                                     " is for ", r->ranks, " ranks x ", r->experts, " experts (",
                                                     r->tokens.size(), " counts); the plan has ", ranks,
                                                     " expert-parallel ranks and the layer ", experts, " experts"));
    }
  }
  const double even = tokens_per_rank * static_cast<double>(l.top_k) / std::max(1, experts);
  const double cap = e.plan.experts.capacity_factor > 0 ? e.plan.experts.capacity_factor * even : -1;
  // The routing table gives one micro-batch of the full micro-batch size; slices scale it.
  Routing demand{ranks, experts, std::vector<double>(static_cast<size_t>(ranks) * static_cast<size_t>(experts), even)};
  if (r != nullptr) {
    for (size_t i = 0; i < demand.tokens.size(); ++i) demand.tokens[i] = r->tokens[i] * lane.fraction;
  }
  TokenFlow flow = RouteTokens(demand, place, cap);
  TokenExchange x;
  x.ranks = ranks;
  x.tokens = std::move(flow.sent);
  x.expert_tokens = std::move(flow.computed);
  x.dropped = flow.dropped;
  return x;
}

}  // namespace testbed::expand
