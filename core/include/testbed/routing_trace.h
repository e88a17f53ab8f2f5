// MoE routing traces: the tokens each rank routed to each expert of each MoE layer in each
// iteration, recorded from a run (or from a user's own model) and replayed by the load
// balancers' `routing = "<file>"`.
//
// File format (HDF5): one dataset "tokens", 64-bit floats (integers are read too), of four
// dimensions (iterations, MoE layers, ranks, experts): tokens[t][l][r][e] is what rank r of
// the expert-parallel group routed to expert e in the l-th MoE layer of the model (in layer
// order) during one micro-batch of iteration t; a token routed to k experts counts once for
// each. Optional string attributes of the dataset: "model" and "source" (what recorded it).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/step_inputs.h"

namespace testbed {

struct RoutingTrace {
  int iterations = 0, layers = 0, ranks = 0, experts = 0;
  std::vector<double> tokens;  // row-major (iterations, layers, ranks, experts)
  std::string model, source;

  // The routing of MoE layer `layer` in iteration `iteration`.
  [[nodiscard]] Routing Slice(int iteration, int layer) const;
};

// Errors name the file and the dataset: not an HDF5 file, no dataset "tokens", not four
// dimensions, a negative or non-finite count (with its index).
[[nodiscard]] absl::StatusOr<RoutingTrace> ReadRoutingTrace(const std::filesystem::path& path);
// Writes (replacing) `path`, creating its directory; InvalidArgument when the counts do not
// match the dimensions.
[[nodiscard]] absl::Status WriteRoutingTrace(const std::filesystem::path& path, const RoutingTrace& trace);

}  // namespace testbed
