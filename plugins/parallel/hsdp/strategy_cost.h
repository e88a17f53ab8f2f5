// HSDP's communication parallel strategy and its cost model.
//
// A strategy splits each layer's weights into `chunks` equal pieces and gives each piece to
// one link class: the piece is all-gathered before each use, and its gradient reduce-scattered
// after the backward, on that class only, while the other classes carry the other pieces at
// the same time (sharding stays full: every device keeps 1/dp of every piece).
//
// The cost of a strategy is the time of one iteration of sharded data parallelism with one
// layer of prefetch (the model of the simulator's ZeRO-3 expansion, param_gather.h), where a
// layer's communication takes as long as its most loaded link:
//   a piece of b bytes on class c loads each link l of the class's plan with s(c, l) * b
//   seconds and adds the class's latency on those links, and pieces that share a link add up;
//   forward:  G(0) + sum over l of max(F(l), G(l + 1)), the last layer's backward gather
//             overlapping its own forward;
//   backward: sum over l (last first) of max(B(l), AG(l - 1) + RS(l + 1) on each link) + RS(0).
#pragma once

#include <string>
#include <vector>

#include "link_class_costs.h"

namespace testbed::hsdp {

struct LayerLoad {
  double bytes = 0;  // weights gathered before each use (and gradient bytes reduce-scattered)
  double fwd_s = 0;  // compute of the layer on one device
  double bwd_s = 0;
};

struct Problem {
  std::vector<LayerLoad> layers;
  std::vector<ClassCost> classes;
  int chunks = 8;  // pieces of each layer
};

// pieces[l][c]: chunks of layer l given to class c (each row sums to Problem::chunks).
struct Strategy {
  std::vector<std::vector<int>> pieces;
};

// Time of one iteration under the cost model (seconds).
[[nodiscard]] double StrategyCost(const Problem& problem, const Strategy& strategy);

// Every layer on class `c` alone (single-link sharded data parallelism on that class).
[[nodiscard]] Strategy SingleClass(const Problem& problem, int c);
// Every layer's chunks dealt over the classes as evenly as they go, the first classes taking
// one more where they do not divide (the planner's "even" split, an ablation of the search).
[[nodiscard]] Strategy Even(const Problem& problem);

// "24 layers: nvlink 5/8, pcie 3/8" (the most common split), or per-layer splits when few.
[[nodiscard]] std::string Describe(const Problem& problem, const Strategy& strategy);

}  // namespace testbed::hsdp
