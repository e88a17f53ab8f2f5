// The executor's model for a ModelGraph, chosen by family (gpt_stack.h, mlp_stack.h,
// cnn_stack.h), and the layouts each family runs in.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/model_graph.h"
#include "testbed/train/sequential_model.h"

namespace testbed::exec {

// The whole (unsharded) model of `graph`, weights drawn from `seed`: one executor layer per
// graph layer. InvalidArgument for a family the executor does not train.
[[nodiscard]] absl::StatusOr<train::SequentialModel<float>> BuildExecutorStack(const ModelGraph& graph,
                                                                              std::uint64_t seed);

// Whether the model reads rows of `shape.inputs` features (mlp, cnn) rather than token ids.
[[nodiscard]] bool ReadsFeatureRows(const ModelShape& shape) noexcept;

// InvalidArgument when the family does not run at tensor-parallel degree `tp` with `pp`
// pipeline stages: the classifiers have no tensor-parallel split; a cnn's layers hand on
// feature maps of different widths, which the pipeline transfers do not carry (pp = 1).
[[nodiscard]] absl::Status CheckExecutorLayout(const ModelShape& shape, int tp, int pp);

}  // namespace testbed::exec
