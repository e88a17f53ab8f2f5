// The executor's convolutional classifier, layer for layer the core's "cnn" ModelGraph: one
// ConvBlock per conv layer, then the dense layers and the classifier of the mlp (DenseLayer).
// Activations are rows of NCHW-flattened feature maps (testbed/train/conv2d.h). Data
// parallel only (no tensor split, one pipeline stage).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/model_graph.h"
#include "testbed/train/conv2d.h"
#include "testbed/train/pool2d.h"
#include "testbed/train/relu.h"
#include "testbed/train/rng.h"
#include "testbed/train/sequential_model.h"

namespace testbed::exec {

// MaxPool2x2(ReLU(conv(x))): a kernel x kernel convolution with stride 1 and zero padding
// kernel / 2 and a bias, ReLU, then 2x2 max-pooling with stride 2.
// x: [batch, in_channels * size^2] -> [batch, out_channels * (size / 2)^2].
class ConvBlock final : public train::Layer<float> {
 public:
  ConvBlock(const std::string& name, std::int64_t in_channels, std::int64_t out_channels, std::int64_t size,
            std::int64_t kernel, train::Rng& rng);
  [[nodiscard]] std::string kind() const override { return "conv_block"; }
  [[nodiscard]] absl::StatusOr<train::Matrix<float>> Forward(const train::Matrix<float>& x,
                                                             train::LayerCache<float>& cache) override;
  [[nodiscard]] absl::StatusOr<train::Matrix<float>> Backward(const train::Matrix<float>& dy,
                                                              const train::LayerCache<float>& cache) override;
  [[nodiscard]] std::vector<train::Param<float>*> Params() override { return conv_.Params(); }
  // The convolution is the block's only matrix product.
  [[nodiscard]] absl::Status SetQuantization(const train::LayerQuant& q) override { return conv_.SetQuantization(q); }
  [[nodiscard]] std::unique_ptr<train::Layer<float>> Clone() const override {
    return std::make_unique<ConvBlock>(*this);
  }
  [[nodiscard]] const train::Conv2d<float>& conv() const noexcept { return conv_; }

 private:
  train::Conv2d<float> conv_;
  train::Relu<float> relu_;
  train::MaxPool2d<float> pool_;
};

// The model of a "cnn" graph (weights drawn from `seed`), one executor layer per graph layer.
[[nodiscard]] absl::StatusOr<train::SequentialModel<float>> BuildCnnStack(const ModelGraph& graph, std::uint64_t seed);

}  // namespace testbed::exec
