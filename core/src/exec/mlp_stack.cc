#include "exec/mlp_stack.h"

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::exec {

DenseLayer::DenseLayer(const std::string& name, std::int64_t in, std::int64_t out, bool activation, train::Rng& rng)
    : linear_(name, in, out, true, rng, 0.0), activation_(activation) {}

absl::StatusOr<train::Matrix<float>> DenseLayer::Forward(const train::Matrix<float>& x, train::LayerCache<float>& cache) {
  cache.Clear();
  cache.children.resize(2);
  TESTBED_ASSIGN_OR_RETURN(train::Matrix<float> y, linear_.Forward(x, cache.children[0]));
  if (!activation_) return y;
  return gelu_.Forward(y, cache.children[1]);
}

absl::StatusOr<train::Matrix<float>> DenseLayer::Backward(const train::Matrix<float>& dy,
                                                          const train::LayerCache<float>& cache) {
  train::Matrix<float> d = dy;
  if (activation_) {
    TESTBED_ASSIGN_OR_RETURN(d, gelu_.Backward(dy, cache.children[1]));
  }
  return linear_.Backward(d, cache.children[0]);
}

absl::StatusOr<train::SequentialModel<float>> BuildMlpStack(const ModelGraph& graph, std::uint64_t seed) {
  if (graph.shape.family != "mlp") {
    return absl::InvalidArgumentError(absl::StrCat("model '", graph.shape.name, "' is not an mlp"));
  }
  train::Rng rng(seed);
  train::SequentialModel<float> model;
  for (size_t i = 0; i < graph.layers.size(); ++i) {
    const Layer& l = graph.layers[i];
    model.Add(std::make_unique<DenseLayer>(l.name, l.ffn_hidden, l.hidden, i + 1 < graph.layers.size(), rng));
  }
  return model;
}

}  // namespace testbed::exec
