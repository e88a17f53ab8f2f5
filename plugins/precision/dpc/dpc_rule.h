// DPC's rule (decreasing precision with layer capacity): each layer's bit width from its
// capacity alone, with no analysis of the training run. Layers with more capacity get fewer
// bits. The paper's exact rule was not available; this is the reading described in README.md,
// with every choice a parameter.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"

namespace testbed::dpc {

struct DpcRule {
  // "params": the layer's parameter count; "params_per_output": parameters per output
  // feature (per token for sequence models), about the fan-in.
  std::string capacity = "params";
  // How capacity maps onto the ladder (widest first):
  //   "log_range": position of log(capacity) between the smallest and the largest capacity
  //                of the layers ranked, split into equal intervals, one per rung;
  //   "quantile":  the share of ranked layers with strictly less capacity, split into equal
  //                intervals (equal capacities always share a width);
  //   "threshold": capacity below thresholds[0] -> ladder[0], below thresholds[1] ->
  //                ladder[1], ..., the rest -> the last rung.
  std::string map = "log_range";
  std::vector<int> ladder = {8, 6, 4};  // strictly decreasing widths, each 2..8, 16 or 32
  std::vector<double> thresholds;       // "threshold": ladder.size() - 1 increasing capacities
  // The first and the last layer with matrix products are kept at edge_bits and not
  // ranked (as quantisation work keeps the input and classifier layers wide), as are the
  // layers named in `keep`.
  bool keep_edges = true;
  int edge_bits = 8;
  std::vector<std::string> keep;
  int gradient_bits = 0;  // every layer's gradient width (0: the run's precision)
};

// InvalidArgument naming the parameter when the rule is inconsistent (a width outside the
// supported set, a ladder that does not decrease, thresholds of the wrong count or order).
[[nodiscard]] absl::Status CheckRule(const DpcRule& rule);

// The capacity of `layer` under `measure` ("params" | "params_per_output").
[[nodiscard]] double LayerCapacity(const Layer& layer, const std::string& measure) noexcept;

// The widths of every layer of `model`. Layers without matrix products (an embedding
// lookup) keep the run's precision (0). InvalidArgument for a `keep` name the model lacks.
[[nodiscard]] absl::StatusOr<std::vector<LayerPrecision>> AssignWidths(const ModelGraph& model, const DpcRule& rule);

}  // namespace testbed::dpc
