#include "exec/executor_stack.h"

#include "absl/strings/str_cat.h"
#include "exec/cnn_stack.h"
#include "exec/gpt_stack.h"
#include "exec/mlp_stack.h"

namespace testbed::exec {

absl::StatusOr<train::SequentialModel<float>> BuildExecutorStack(const ModelGraph& graph, std::uint64_t seed) {
  const std::string& family = graph.shape.family;
  if (family == "mlp") return BuildMlpStack(graph, seed);
  if (family == "cnn") return BuildCnnStack(graph, seed);
  return BuildGptStack(graph, seed);  // refuses the families it does not build
}

bool ReadsFeatureRows(const ModelShape& shape) noexcept { return shape.family == "mlp" || shape.family == "cnn"; }

absl::Status CheckExecutorLayout(const ModelShape& shape, int tp, int pp) {
  if (ReadsFeatureRows(shape) && tp > 1) {
    return absl::InvalidArgumentError(absl::StrCat(shape.family == "mlp" ? "an mlp" : "a cnn",
                                                   " runs without tensor parallelism (tp = 1); got tp = ", tp));
  }
  if (shape.family == "cnn" && pp > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a cnn runs data parallel only, in one pipeline stage (pp = 1); got pp = ", pp));
  }
  return absl::OkStatus();
}

}  // namespace testbed::exec
