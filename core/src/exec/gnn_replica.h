// One data-parallel replica of real GNN training (exec/gnn_training.h) on one rank: its
// feature loader, its device rows (graph/device_rows.h), its copy of the model and optimizer.
// Each step it trains on its micro-batches, then all-reduces the gradients and the step's
// figures over the ranks, so every rank applies the same update and knows the same totals.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "exec/gnn_stack.h"
#include "graph/batch_stream.h"
#include "graph/device_rows.h"
#include "graph/graph_source.h"
#include "testbed/communicator.h"
#include "testbed/feature_loader.h"
#include "testbed/train/optimizer.h"

namespace testbed::exec {

// What every replica shares, read-only.
struct GnnTrainingSetup {
  const SourceGraph* graph = nullptr;  // with features and labels
  std::vector<std::int64_t> degrees;
  FeatureGraph feature_graph;          // its `degrees` spans `degrees`
  std::vector<int> fanouts;
  std::int64_t micro_batch = 1, micro_batches = 1;
  int dp = 1;
  std::uint64_t seed = 0;
  std::string optimizer = "adam";
  double learning_rate = 1e-3, momentum = 0, weight_decay = 0;
  std::string loader_name;  // for errors
};

// One step's figures, summed over the replicas (resident_rows: the largest).
struct GnnStepFigures {
  double loss = 0, copy_bytes = 0, copy_rows = 0, input_rows = 0, copy_s = 0, detect_s = 0, wall_s = 0;
  double resident_rows = 0, capacity_rows = 0;
};

class GnnReplica {
 public:
  // Builds the model (the same weights on every replica: from setup.seed) and runs the loader's
  // Begin into the device rows.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GnnReplica>> Create(const GnnTrainingSetup& setup, const ModelShape& shape,
                                                                          std::shared_ptr<FeatureLoader> loader,
                                                                          CommGroup& comm);

  // Iteration `it`: this replica's micro-batches, the all-reduce, the update.
  [[nodiscard]] absl::StatusOr<GnnStepFigures> Step(std::int64_t it);
  // Accuracy on the held-out vertices, sampled as in training (rows read from the host).
  [[nodiscard]] absl::StatusOr<double> TestAccuracy();

  [[nodiscard]] double setup_rows() const noexcept { return setup_rows_; }

 private:
  GnnReplica(const GnnTrainingSetup& setup, GnnStack model, std::shared_ptr<FeatureLoader> loader, CommGroup& comm);
  [[nodiscard]] absl::Status AllReduce(std::vector<double>& values, ReduceOp op);

  const GnnTrainingSetup& setup_;
  GnnStack model_;
  std::vector<train::Param<float>*> params_;
  std::unique_ptr<train::Optimizer<float>> optimizer_;
  std::shared_ptr<FeatureLoader> loader_;
  CommGroup& comm_;
  DeviceRows device_;
  BatchStream stream_;
  double setup_rows_ = 0;
  std::vector<float> flat_;  // the gradients, flattened for the all-reduce
};

}  // namespace testbed::exec
