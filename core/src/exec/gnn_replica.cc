#include "exec/gnn_replica.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "exec/replica_sync.h"
#include "testbed/status_macros.h"
#include "testbed/train/adam.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/sgd.h"

namespace testbed::exec {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::int64_t> LabelsOf(const SourceGraph& g, const std::vector<std::int64_t>& vertices) {
  std::vector<std::int64_t> out;
  out.reserve(vertices.size());
  for (std::int64_t v : vertices) out.push_back(g.labels[static_cast<size_t>(v)]);
  return out;
}

}  // namespace

GnnReplica::GnnReplica(const GnnTrainingSetup& setup, GnnStack model, std::shared_ptr<FeatureLoader> loader,
                       CommGroup& comm)
    : setup_(setup),
      model_(std::move(model)),
      loader_(std::move(loader)),
      comm_(comm),
      device_(setup.graph->features),
      stream_(*setup.graph, setup.fanouts, setup.micro_batch, setup.seed, setup.feature_graph.threads) {
  params_ = model_.Params();
  if (setup.optimizer == "sgd") {
    optimizer_ = std::make_unique<train::Sgd<float>>(train::SgdOptions{setup.learning_rate, setup.momentum, 0.0});
  } else {
    train::AdamOptions ao;
    ao.learning_rate = setup.learning_rate;
    optimizer_ = std::make_unique<train::Adam<float>>(ao);
  }
}

absl::StatusOr<std::unique_ptr<GnnReplica>> GnnReplica::Create(const GnnTrainingSetup& setup, const ModelShape& shape,
                                                               std::shared_ptr<FeatureLoader> loader, CommGroup& comm) {
  TESTBED_ASSIGN_OR_RETURN(GnnStack model, GnnStack::Build(shape, shape.inputs, setup.graph->classes, setup.seed));
  std::unique_ptr<GnnReplica> r(new GnnReplica(setup, std::move(model), std::move(loader), comm));
  TESTBED_ASSIGN_OR_RETURN(FeatureLoad begun, r->loader_->Begin(setup.feature_graph));
  TESTBED_ASSIGN_OR_RETURN(double copy_s, r->device_.Apply(begun, {}, nullptr));
  (void)copy_s;  // a one-off before training
  r->setup_rows_ = static_cast<double>(begun.copied.size());
  return r;
}

absl::Status GnnReplica::AllReduce(std::vector<double>& values, ReduceOp op) {
  TESTBED_ASSIGN_OR_RETURN(CommRequestPtr req, comm_.IAllReduce(values.data(), values.data(),
                                                                static_cast<std::int64_t>(values.size()),
                                                                DataType::kFloat64, op));
  return req->Wait();
}

absl::StatusOr<GnnStepFigures> GnnReplica::Step(std::int64_t it) {
  const auto t0 = Clock::now();
  const SourceGraph& g = *setup_.graph;
  const int rank = comm_.rank();
  const double seeds_per_iteration = static_cast<double>(setup_.dp * setup_.micro_batches * setup_.micro_batch);
  std::vector<std::int64_t> globals;
  for (std::int64_t m = 0; m < setup_.micro_batches; ++m) {
    globals.push_back(BatchStream::Global(it, m, setup_.micro_batches, setup_.dp, rank));
  }
  TESTBED_ASSIGN_OR_RETURN(std::vector<train::SampledBatch> batches, stream_.Sample(globals));
  // Summed over the ranks: loss, seeds, bytes, rows copied, rows read, copy and detection time.
  std::vector<double> sums(7, 0.0);
  // The largest over the ranks: rows resident after a batch, rows the device buffer needed.
  std::vector<double> peaks = {0.0, 0.0};
  for (const train::SampledBatch& b : batches) {
    const std::vector<std::int64_t>& inputs = b.hops.back();
    TESTBED_ASSIGN_OR_RETURN(FeatureLoad load, loader_->Next(inputs));
    train::Matrix<float> x;
    absl::StatusOr<double> copy_s = device_.Apply(load, inputs, &x);
    if (!copy_s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("feature_loader '", setup_.loader_name, "', replica ", rank,
                                                     ", iteration ", it, ": ", copy_s.status().message()));
    }
    TESTBED_ASSIGN_OR_RETURN(train::Matrix<float> logits, model_.Forward(x, b, setup_.degrees));
    // Normalised by the iteration's seeds over every replica and micro-batch: the all-reduced
    // sum of the gradients is the mean's.
    TESTBED_ASSIGN_OR_RETURN(auto lg,
                             train::SoftmaxCrossEntropy<float>(logits, LabelsOf(g, b.hops[0]), seeds_per_iteration));
    TESTBED_RETURN_IF_ERROR(model_.Backward(lg.dlogits));
    sums[0] += lg.loss;
    sums[1] += static_cast<double>(b.hops[0].size());
    sums[2] += static_cast<double>(load.copied.size()) * static_cast<double>(setup_.feature_graph.row_bytes);
    sums[3] += static_cast<double>(load.copied.size());
    sums[4] += static_cast<double>(inputs.size());
    sums[5] += *copy_s;
    sums[6] += load.detect_s;
    peaks[0] = std::max(peaks[0], static_cast<double>(device_.resident_rows()));
  }
  peaks[1] = static_cast<double>(device_.capacity_rows());
  if (setup_.dp > 1) {
    TESTBED_RETURN_IF_ERROR(SumGradients(comm_, params_, flat_));
    TESTBED_RETURN_IF_ERROR(AllReduce(sums, ReduceOp::kSum));
    TESTBED_RETURN_IF_ERROR(AllReduce(peaks, ReduceOp::kMax));
  }
  // [real] weight_decay: L2, weight_decay x w added to every gradient (as the executor does).
  if (setup_.weight_decay > 0) {
    for (train::Param<float>* p : params_) p->grad += static_cast<float>(setup_.weight_decay) * p->value;
  }
  optimizer_->Step(params_);
  for (train::Param<float>* p : params_) p->ZeroGrad();
  GnnStepFigures f;
  // A last batch of an epoch may be short: the loss is the mean over the seeds there were.
  f.loss = sums[0] * seeds_per_iteration / std::max(1.0, sums[1]);
  f.copy_bytes = sums[2];
  f.copy_rows = sums[3];
  f.input_rows = sums[4];
  f.copy_s = sums[5];
  f.detect_s = sums[6];
  f.resident_rows = peaks[0];
  f.capacity_rows = peaks[1];
  f.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return f;
}

absl::StatusOr<double> GnnReplica::TestAccuracy() {
  const SourceGraph& g = *setup_.graph;
  if (g.test.empty()) return 0.0;
  train::Rng rng(setup_.seed ^ 0x7e57ULL);
  double correct = 0;
  for (size_t first = 0; first < g.test.size(); first += 512) {
    const std::vector<std::int64_t> seeds(g.test.begin() + static_cast<std::ptrdiff_t>(first),
                                          g.test.begin() + static_cast<std::ptrdiff_t>(std::min(g.test.size(), first + 512)));
    TESTBED_ASSIGN_OR_RETURN(train::SampledBatch b, train::SampleNeighbors(g.graph, seeds, setup_.fanouts, rng));
    train::Matrix<float> x(static_cast<Eigen::Index>(b.hops.back().size()), g.features.cols());
    for (size_t i = 0; i < b.hops.back().size(); ++i) x.row(static_cast<Eigen::Index>(i)) = g.features.row(b.hops.back()[i]);
    TESTBED_ASSIGN_OR_RETURN(train::Matrix<float> logits, model_.Forward(x, b, setup_.degrees));
    correct += train::Accuracy<float>(logits, LabelsOf(g, seeds)) * static_cast<double>(seeds.size());
  }
  return correct / static_cast<double>(g.test.size());
}

}  // namespace testbed::exec
