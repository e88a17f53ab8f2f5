// Family "gnn" of the model graph (testbed/model_graph.h): a sampling-based GNN node
// classifier, one graph layer per hop of neighbour sampling.
#pragma once

#include "absl/status/statusor.h"
#include "testbed/model_graph.h"

namespace testbed {

// The layers "gnn0" (applied to the farthest hop's features) to "gnn<L-1>" (to the seeds,
// out to the classes). InvalidArgument naming the model for a shape that is not a GNN's:
// no fanouts or a fanout < 1, layers not equal to the fanouts' count, inputs < 1, vocab < 2,
// hidden < 1 with more than one layer, an unknown gnn_layer, a GAT hidden width that its
// heads do not divide.
[[nodiscard]] absl::StatusOr<ModelGraph> BuildGnn(const ModelShape& shape);

}  // namespace testbed
