#include "exec/cnn_stack.h"

#include "absl/strings/str_cat.h"
#include "exec/mlp_stack.h"
#include "testbed/status_macros.h"

namespace testbed::exec {

ConvBlock::ConvBlock(const std::string& name, std::int64_t in_channels, std::int64_t out_channels, std::int64_t size,
                     std::int64_t kernel, train::Rng& rng)
    : conv_(name + ".conv", in_channels, out_channels, size, size, kernel, 1, kernel / 2, true, rng),
      pool_(name + ".pool", out_channels, conv_.out_height(), conv_.out_width(), 2, 2) {}

absl::StatusOr<train::Matrix<float>> ConvBlock::Forward(const train::Matrix<float>& x,
                                                        train::LayerCache<float>& cache) {
  cache.Clear();
  cache.children.resize(3);
  TESTBED_ASSIGN_OR_RETURN(train::Matrix<float> y, conv_.Forward(x, cache.children[0]));
  TESTBED_ASSIGN_OR_RETURN(y, relu_.Forward(y, cache.children[1]));
  return pool_.Forward(y, cache.children[2]);
}

absl::StatusOr<train::Matrix<float>> ConvBlock::Backward(const train::Matrix<float>& dy,
                                                         const train::LayerCache<float>& cache) {
  if (cache.children.size() != 3) {
    return absl::InvalidArgumentError("conv block: backward without the cache of its forward pass");
  }
  TESTBED_ASSIGN_OR_RETURN(train::Matrix<float> d, pool_.Backward(dy, cache.children[2]));
  TESTBED_ASSIGN_OR_RETURN(d, relu_.Backward(d, cache.children[1]));
  return conv_.Backward(d, cache.children[0]);
}

absl::StatusOr<train::SequentialModel<float>> BuildCnnStack(const ModelGraph& graph, std::uint64_t seed) {
  if (graph.shape.family != "cnn") {
    return absl::InvalidArgumentError(absl::StrCat("model '", graph.shape.name, "' is not a cnn"));
  }
  train::Rng rng(seed);
  train::SequentialModel<float> model;
  for (size_t i = 0; i < graph.layers.size(); ++i) {
    const Layer& l = graph.layers[i];
    if (l.kind == LayerKind::kConv) {
      model.Add(std::make_unique<ConvBlock>(l.name, l.conv_in_channels, l.conv_out_channels, l.conv_image_size,
                                            l.conv_kernel, rng));
    } else if (l.kind == LayerKind::kDense) {
      model.Add(std::make_unique<DenseLayer>(l.name, l.ffn_hidden, l.hidden, i + 1 < graph.layers.size(), rng));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", graph.shape.name, "': a cnn has no ", LayerKindName(l.kind), " layer ('", l.name, "')"));
    }
  }
  return model;
}

}  // namespace testbed::exec
