// GNN training on Cora, for real: a two-layer GCN trained full-batch in Kipf & Welling's
// setting (hidden 16, ReLU, dropout 0.5, Adam at 0.01, L2 5e-4 on the first layer, 200
// epochs, row-normalised features, the Planetoid split) against their reported test accuracy
// of 81.5%; a two-layer GAT full-batch in Veličković et al.'s setting against their 83.0%;
// and a two-layer GraphSAGE (mean aggregation) trained on sampled mini-batches
// (fanouts 25, 10; batches of 32 training vertices shuffled per epoch). Under the sanitizers
// (unoptimised) the runs are cut short and only the falling loss is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "testbed/train/adam.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/gat_layer.h"
#include "testbed/train/gcn_layer.h"
#include "testbed/train/graph.h"
#include "testbed/train/neighbor_sampler.h"
#include "testbed/train/sage_layer.h"

namespace testbed::train {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kShort = true;
#else
constexpr bool kShort = false;
#endif

GraphDataset Cora() {
  auto ds = LoadPlanetoid(std::string(TESTBED_DATA_DIR) + "/graphs/cora", "cora");
  EXPECT_TRUE(ds.ok()) << ds.status();
  // Kipf & Welling's preprocessing: each vertex's features sum to 1.
  for (Eigen::Index r = 0; r < ds->features.rows(); ++r) {
    const float sum = ds->features.row(r).sum();
    if (sum > 0) ds->features.row(r) /= sum;
  }
  return std::move(*ds);
}

// Inverted dropout: keeps each element with probability 1 - p, scaled by 1 / (1 - p).
Matrix<float> DropoutMask(Eigen::Index rows, Eigen::Index cols, double p, Rng& rng) {
  Matrix<float> mask(rows, cols);
  for (Eigen::Index i = 0; i < mask.size(); ++i) mask.data()[i] = rng.Uniform() < p ? 0.0f : static_cast<float>(1 / (1 - p));
  return mask;
}

Matrix<float> Rows(const Matrix<float>& m, const std::vector<std::int64_t>& rows) {
  Matrix<float> out(static_cast<Eigen::Index>(rows.size()), m.cols());
  for (size_t i = 0; i < rows.size(); ++i) out.row(static_cast<Eigen::Index>(i)) = m.row(rows[i]);
  return out;
}

// The inverse of Rows: `m`'s rows placed at `rows` of a zero matrix of `total` rows (the
// gradient of the whole graph's logits from that of the labelled vertices' rows).
Matrix<float> ScatterRows(const Matrix<float>& m, const std::vector<std::int64_t>& rows, Eigen::Index total) {
  Matrix<float> out = Matrix<float>::Zero(total, m.cols());
  for (size_t i = 0; i < rows.size(); ++i) out.row(rows[i]) = m.row(static_cast<Eigen::Index>(i));
  return out;
}

std::vector<std::int64_t> LabelsOf(const GraphDataset& ds, const std::vector<std::int64_t>& vertices) {
  std::vector<std::int64_t> out;
  for (std::int64_t v : vertices) out.push_back(ds.labels[static_cast<size_t>(v)]);
  return out;
}

TEST(GnnTraining, FullBatchGcnOnCoraReachesThePapersAccuracy) {
  const GraphDataset ds = Cora();
  const Graph& g = ds.graph;
  std::vector<std::int64_t> degrees(static_cast<size_t>(g.vertices));
  for (std::int64_t v = 0; v < g.vertices; ++v) degrees[static_cast<size_t>(v)] = g.Degree(v);
  Rng init(1), drop(2);
  GcnLayer<float> l1("gcn1", ds.features.cols(), 16, init), l2("gcn2", 16, ds.classes, init);
  std::vector<Param<float>*> params = l1.Params();
  for (Param<float>* p : l2.Params()) params.push_back(p);
  AdamOptions ao;
  ao.learning_rate = 0.01;
  Adam<float> adam(ao);
  const std::vector<std::int64_t> train_labels = LabelsOf(ds, ds.train), test_labels = LabelsOf(ds, ds.test);
  auto forward = [&](bool training, LayerCache<float>& c1, LayerCache<float>& c2,
                     Matrix<float>& mask_hidden) -> Matrix<float> {
    Matrix<float> x = ds.features;
    if (training) {
      // Dropout on the non-zero features only (zeros stay zero either way), as the paper's
      // sparse dropout: a draw per non-zero instead of per element.
      for (Eigen::Index i = 0; i < x.size(); ++i) {
        if (x.data()[i] != 0.0f) x.data()[i] = drop.Uniform() < 0.5 ? 0.0f : 2.0f * x.data()[i];
      }
    }
    Matrix<float> h = *l1.Forward(x, g.adjacency, degrees, c1);
    h = h.cwiseMax(0.0f);
    mask_hidden = (h.array() > 0).cast<float>();
    if (training) {
      const Matrix<float> d = DropoutMask(h.rows(), h.cols(), 0.5, drop);
      h.array() *= d.array();
      mask_hidden.array() *= d.array();
    }
    return *l2.Forward(h, g.adjacency, degrees, c2);
  };
  const int epochs = kShort ? 5 : 200;
  double first = 0, last = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    LayerCache<float> c1, c2;
    Matrix<float> mask_hidden;
    const Matrix<float> logits = forward(true, c1, c2, mask_hidden);
    auto lg = SoftmaxCrossEntropy<float>(Rows(logits, ds.train), train_labels);
    ASSERT_TRUE(lg.ok()) << lg.status();
    if (epoch == 0) first = lg->loss;
    last = lg->loss;
    const Matrix<float> dlogits = ScatterRows(lg->dlogits, ds.train, logits.rows());
    Matrix<float> dh = *l2.Backward(dlogits, c2);
    dh.array() *= mask_hidden.array();
    ASSERT_TRUE(l1.Backward(dh, c1).ok());
    params[0]->grad += 5e-4f * params[0]->value;  // L2 on the first layer's weights
    adam.Step(params);
    for (Param<float>* p : params) p->ZeroGrad();
  }
  EXPECT_LT(last, first);
  if (kShort) GTEST_SKIP() << "unoptimised build: 5 epochs, loss " << first << " -> " << last;
  LayerCache<float> c1, c2;
  Matrix<float> m2;
  const Matrix<float> logits = forward(false, c1, c2, m2);
  const double accuracy = Accuracy<float>(Rows(logits, ds.test), test_labels);
  // Kipf & Welling 2017, Table 2: 81.5% (their mean over runs); one seed here.
  EXPECT_GT(accuracy, 0.78) << "test accuracy " << accuracy;
  EXPECT_LT(accuracy, 0.86) << "test accuracy " << accuracy;
  std::printf("GCN on Cora: test accuracy %.3f (Kipf & Welling: 0.815)\n", accuracy);
}

TEST(GnnTraining, FullBatchGatOnCoraReachesThePapersAccuracy) {
  // Veličković et al.'s Cora setting: 8 heads of 8 features concatenated, ELU, an output layer
  // of 1 head (averaged), Adam at 0.005, L2 5e-4 on the weights and attention vectors, dropout
  // 0.6 on both layers' inputs (drawn here; the paper also drops attention coefficients, which
  // GatLayer does not). A fixed 200 epochs instead of the paper's early stopping (patience
  // 100), to keep the run near 30 s: test accuracy has reached its plateau by then (three
  // seeds: 0.807-0.818 at 200 epochs, 0.793-0.829 at 300 and 400).
  const GraphDataset ds = Cora();
  const Graph& g = ds.graph;
  Rng init(5), drop(6);
  GatLayer<float> l1("gat1", ds.features.cols(), 8, 8, GatCombine::kConcat, init);
  GatLayer<float> l2("gat2", l1.out_cols(), ds.classes, 1, GatCombine::kMean, init);
  std::vector<Param<float>*> params = l1.Params();
  for (Param<float>* p : l2.Params()) params.push_back(p);
  AdamOptions ao;
  ao.learning_rate = 0.005;
  Adam<float> adam(ao);
  const std::vector<std::int64_t> train_labels = LabelsOf(ds, ds.train), test_labels = LabelsOf(ds, ds.test);
  constexpr double kDrop = 0.6;
  auto forward = [&](bool training, LayerCache<float>& c1, LayerCache<float>& c2,
                     Matrix<float>& dh_dpre) -> Matrix<float> {
    Matrix<float> x = ds.features;
    if (training) {  // on the non-zero features only, as for the GCN
      for (Eigen::Index i = 0; i < x.size(); ++i) {
        if (x.data()[i] == 0.0f) continue;
        x.data()[i] = drop.Uniform() < kDrop ? 0.0f : x.data()[i] / static_cast<float>(1 - kDrop);
      }
    }
    Matrix<float> h = *l1.Forward(x, g.adjacency, c1);
    // ELU; its derivative from the output: 1 above zero, exp(pre) = h + 1 below.
    h = h.unaryExpr([](float v) { return v > 0 ? v : std::expm1(v); });
    dh_dpre = h.unaryExpr([](float v) { return v > 0 ? 1.0f : v + 1.0f; });
    if (training) {
      const Matrix<float> d = DropoutMask(h.rows(), h.cols(), kDrop, drop);
      h.array() *= d.array();
      dh_dpre.array() *= d.array();
    }
    return *l2.Forward(h, g.adjacency, c2);
  };
  const int epochs = kShort ? 3 : 200;
  double first = 0, last = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    LayerCache<float> c1, c2;
    Matrix<float> dh_dpre;
    const Matrix<float> logits = forward(true, c1, c2, dh_dpre);
    auto lg = SoftmaxCrossEntropy<float>(Rows(logits, ds.train), train_labels);
    ASSERT_TRUE(lg.ok()) << lg.status();
    if (epoch == 0) first = lg->loss;
    last = lg->loss;
    const Matrix<float> dlogits = ScatterRows(lg->dlogits, ds.train, logits.rows());
    auto dh = l2.Backward(dlogits, c2);
    ASSERT_TRUE(dh.ok()) << dh.status();
    dh->array() *= dh_dpre.array();
    ASSERT_TRUE(l1.Backward(*dh, c1).ok());
    // L2 (the paper's loss term) on weights and attention vectors, not on the biases.
    for (Param<float>* p : params) {
      if (p->name.find(".bias") == std::string::npos) p->grad += 5e-4f * p->value;
    }
    adam.Step(params);
    for (Param<float>* p : params) p->ZeroGrad();
  }
  EXPECT_LT(last, first);
  if (kShort) GTEST_SKIP() << "unoptimised build: " << epochs << " epochs, loss " << first << " -> " << last;
  LayerCache<float> c1, c2;
  Matrix<float> unused;
  const Matrix<float> logits = forward(false, c1, c2, unused);
  const double accuracy = Accuracy<float>(Rows(logits, ds.test), test_labels);
  // Veličković et al. 2018, Table 2: 83.0% ± 0.7 (mean over 100 runs); one seed here.
  EXPECT_GT(accuracy, 0.78) << "test accuracy " << accuracy;
  EXPECT_LT(accuracy, 0.87) << "test accuracy " << accuracy;
  std::printf("GAT on Cora: test accuracy %.3f (Veličković et al.: 0.830)\n", accuracy);
}

TEST(GnnTraining, MiniBatchGraphSageOnCoraLearns) {
  const GraphDataset ds = Cora();
  const Graph& g = ds.graph;
  Rng init(3), sampling(4);
  SageMeanLayer<float> l1("sage1", ds.features.cols(), 64, init), l2("sage2", 64, ds.classes, init);
  std::vector<Param<float>*> params = l1.Params();
  for (Param<float>* p : l2.Params()) params.push_back(p);
  AdamOptions ao;
  ao.learning_rate = 0.01;
  ao.weight_decay = 5e-4;
  Adam<float> adam(ao);
  const std::vector<int> fanouts = {25, 10};
  auto run = [&](const std::vector<std::int64_t>& seeds, bool train) -> double {
    auto batch = SampleNeighbors(g, seeds, fanouts, sampling);
    EXPECT_TRUE(batch.ok());
    // hops[2] holds every vertex the two layers read; hops[1] the first layer's targets.
    LayerCache<float> c1, c2;
    Matrix<float> h = *l1.Forward(Rows(ds.features, batch->hops[2]), batch->blocks[1], c1);
    Matrix<float> relu_mask = (h.array() > 0).cast<float>();
    h = h.cwiseMax(0.0f);
    const Matrix<float> logits = *l2.Forward(h, batch->blocks[0], c2);
    const std::vector<std::int64_t> labels = LabelsOf(ds, seeds);
    if (!train) return Accuracy<float>(logits, labels);
    auto lg = SoftmaxCrossEntropy<float>(logits, labels);
    Matrix<float> dh = *l2.Backward(lg->dlogits, c2);
    dh.array() *= relu_mask.array();
    EXPECT_TRUE(l1.Backward(dh, c1).ok());
    adam.Step(params);
    for (Param<float>* p : params) p->ZeroGrad();
    return lg->loss;
  };
  const int epochs = kShort ? 2 : 30;
  double first = -1, last = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double sum = 0;
    int n = 0;
    for (const auto& seeds : EpochBatches(ds.train, 32, 5, epoch)) {
      sum += run(seeds, true);
      ++n;
    }
    if (first < 0) first = sum / n;
    last = sum / n;
  }
  EXPECT_LT(last, first);
  if (kShort) GTEST_SKIP() << "unoptimised build: 2 epochs, loss " << first << " -> " << last;
  const double accuracy = run(ds.test, false);
  // GraphSAGE-mean on Cora's Planetoid split is commonly reported near 80% (e.g. PyG's
  // benchmarks); sampled neighbourhoods at test time, one seed.
  EXPECT_GT(accuracy, 0.72) << "test accuracy " << accuracy;
  std::printf("GraphSAGE on Cora: test accuracy %.3f\n", accuracy);
}

}  // namespace
}  // namespace testbed::train
