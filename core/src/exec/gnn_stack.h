// The executor's model for family "gnn": one graph layer per fanout (GraphSAGE mean, GCN or
// GAT, ModelShape::gnn_layer), the first applied to the farthest hop of a sampled batch, a
// nonlinearity between layers (ReLU; ELU for GAT, as its paper), logits for the seeds.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/model_graph.h"
#include "testbed/train/gat_layer.h"
#include "testbed/train/gcn_layer.h"
#include "testbed/train/graph.h"
#include "testbed/train/neighbor_sampler.h"
#include "testbed/train/sage_layer.h"

namespace testbed::exec {

class GnnStack {
 public:
  // `inputs` features per vertex to `classes` logits; hidden width shape.hidden (GAT: shape.heads
  // heads of hidden / heads features, concatenated; one averaged head at the output, as the
  // GAT paper's transductive setting). InvalidArgument for a shape that does not fit.
  [[nodiscard]] static absl::StatusOr<GnnStack> Build(const ModelShape& shape, std::int64_t inputs,
                                                      std::int64_t classes, std::uint64_t seed);

  // x: the rows of batch.hops.back() in order; returns [seeds, classes]. `degrees`: every
  // vertex's degree in the whole graph (GCN's normalisation).
  [[nodiscard]] absl::StatusOr<train::Matrix<float>> Forward(const train::Matrix<float>& x,
                                                             const train::SampledBatch& batch,
                                                             const std::vector<std::int64_t>& degrees);
  // Gradients of the last Forward's parameters from dlogits (accumulated).
  [[nodiscard]] absl::Status Backward(const train::Matrix<float>& dlogits);
  [[nodiscard]] std::vector<train::Param<float>*> Params();

 private:
  using AnyLayer = std::variant<train::SageMeanLayer<float>, train::GcnLayer<float>, train::GatLayer<float>>;
  GnnStack() = default;

  std::vector<AnyLayer> layers_;
  bool elu_ = false;
  std::vector<train::LayerCache<float>> caches_;
  std::vector<train::Matrix<float>> pre_;  // per hidden layer: its output before the nonlinearity
};

}  // namespace testbed::exec
