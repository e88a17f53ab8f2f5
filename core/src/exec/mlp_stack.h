// The executor's MLP classifier, layer for layer the core's "mlp" ModelGraph: dense layers
// with GELU, then a dense layer to the class logits. Data parallel only (no tensor split).
#pragma once

#include "absl/status/statusor.h"
#include "testbed/model_graph.h"
#include "testbed/train/gelu.h"
#include "testbed/train/linear.h"
#include "testbed/train/sequential_model.h"

namespace testbed::exec {

// GELU(x W + b), or x W + b for the classifier.
class DenseLayer final : public train::Layer<float> {
 public:
  DenseLayer(const std::string& name, std::int64_t in, std::int64_t out, bool activation, train::Rng& rng);
  [[nodiscard]] std::string kind() const override { return "dense"; }
  [[nodiscard]] absl::StatusOr<train::Matrix<float>> Forward(const train::Matrix<float>& x,
                                                             train::LayerCache<float>& cache) override;
  [[nodiscard]] absl::StatusOr<train::Matrix<float>> Backward(const train::Matrix<float>& dy,
                                                              const train::LayerCache<float>& cache) override;
  [[nodiscard]] std::vector<train::Param<float>*> Params() override { return linear_.Params(); }
  [[nodiscard]] absl::Status SetQuantization(const train::LayerQuant& q) override { return linear_.SetQuantization(q); }
  [[nodiscard]] std::unique_ptr<train::Layer<float>> Clone() const override { return std::make_unique<DenseLayer>(*this); }

 private:
  train::Linear<float> linear_;
  train::Gelu<float> gelu_;
  bool activation_;
};

[[nodiscard]] absl::StatusOr<train::SequentialModel<float>> BuildMlpStack(const ModelGraph& graph, std::uint64_t seed);

}  // namespace testbed::exec
