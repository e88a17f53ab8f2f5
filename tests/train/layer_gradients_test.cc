// Every layer's backward pass against finite differences of its forward pass (double
// precision), for the input and every parameter. Parameters are randomised first so that
// no gradient is trivially zero (biases, layer-norm shift and scale).
#include <gtest/gtest.h>

#include "gradient_check.h"
#include "testbed/train/attention.h"
#include "testbed/train/column_parallel_linear.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/embedding.h"
#include "testbed/train/gelu.h"
#include "testbed/train/layer_norm.h"
#include "testbed/train/linear.h"
#include "testbed/train/moe_layer.h"
#include "testbed/train/row_parallel_linear.h"
#include "testbed/train/sage_layer.h"
#include "testbed/train/transformer_block.h"

namespace testbed::train::testing {
namespace {

void Randomize(const std::vector<Param<double>*>& params, std::uint64_t seed, double scale = 0.5) {
  for (Param<double>* p : params) p->value = RandomMatrix(p->value.rows(), p->value.cols(), seed++, scale);
}

TEST(LayerGradients, Linear) {
  Rng rng(1);
  Linear<double> layer("fc", 5, 4, true, rng);
  Randomize(layer.Params(), 10);
  CheckLayerGradients(layer, RandomMatrix(3, 5, 2));
}

TEST(LayerGradients, LinearWithoutBias) {
  Rng rng(1);
  Linear<double> layer("fc", 4, 6, false, rng);
  CheckLayerGradients(layer, RandomMatrix(2, 4, 3));
}

TEST(LayerGradients, Gelu) {
  Gelu<double> layer;
  CheckLayerGradients(layer, RandomMatrix(4, 6, 4, 2.0));
}

TEST(LayerGradients, LayerNorm) {
  LayerNorm<double> layer("ln", 7);
  Randomize(layer.Params(), 20);
  CheckLayerGradients(layer, RandomMatrix(3, 7, 5, 3.0));
}

TEST(LayerGradients, EmbeddingTablesGetTheGradient) {
  Rng rng(2);
  Embedding<double> layer("embed", 5, 3, 4, rng, 0.5);
  // Two sequences of 4 tokens with repeats, so rows of the table accumulate.
  const Matrix<double> ids = IdsToColumn<double>({1, 3, 1, 0, 4, 4, 2, 1});
  CheckLayerGradients(layer, ids, /*check_input=*/false);
}

TEST(LayerGradients, EmbeddingRejectsBadIds) {
  Rng rng(2);
  Embedding<double> layer("embed", 5, 3, 2, rng);
  LayerCache<double> cache;
  EXPECT_EQ(layer.Forward(IdsToColumn<double>({1, 7}), cache).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.Forward(IdsToColumn<double>({1, 2, 3}), cache).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayerGradients, CausalSelfAttention) {
  Rng rng(3);
  CausalSelfAttention<double> layer("attn", 6, 2, 4, rng, 0.4);
  Randomize(layer.Params(), 30);
  CheckLayerGradients(layer, RandomMatrix(8, 6, 6));  // 2 sequences of 4
}

TEST(LayerGradients, AttentionIsCausal) {
  // Changing a later token must not change earlier outputs.
  Rng rng(3);
  CausalSelfAttention<double> layer("attn", 4, 2, 5, rng, 0.5);
  Matrix<double> x = RandomMatrix(5, 4, 7);
  LayerCache<double> c1, c2;
  auto y1 = layer.Forward(x, c1);
  x.row(3) += RandomMatrix(1, 4, 8);
  auto y2 = layer.Forward(x, c2);
  ASSERT_TRUE(y1.ok() && y2.ok());
  EXPECT_EQ(Matrix<double>(y1->topRows(3)), Matrix<double>(y2->topRows(3)));
  EXPECT_NE(Matrix<double>(y1->bottomRows(2)), Matrix<double>(y2->bottomRows(2)));
}

TEST(LayerGradients, TransformerBlock) {
  Rng rng(4);
  TransformerBlock<double> block("block", 6, 3, 3, 10, rng, 0.3);
  Randomize(block.Params(), 40, 0.3);
  CheckLayerGradients(block, RandomMatrix(6, 6, 9));
}

TEST(LayerGradients, ColumnAndRowParallelShards) {
  // A shard is a layer in its own right: its gradients are exact for its slice.
  Rng rng(5);
  Linear<double> full("fc", 5, 7, true, rng);
  Randomize(full.Params(), 50);
  ColumnParallelLinear<double> col(full, 1, 3);
  CheckLayerGradients(col, RandomMatrix(3, 5, 10));
  RowParallelLinear<double> row(full, 2, 3);
  CheckLayerGradients(row, RandomMatrix(3, row.rows().count, 11));
}

TEST(LayerGradients, MixtureOfExpertsWithDroppedTokens) {
  Rng rng(6);
  MoeConfig config{.dim = 4, .hidden = 6, .experts = 3, .top_k = 2, .capacity_factor = 0.7};
  MoeLayer<double> layer("moe", config, rng, 0.5);
  Randomize(layer.Params(), 60);
  const Matrix<double> x = RandomMatrix(7, 4, 12);
  LayerCache<double> cache;
  ASSERT_TRUE(layer.Forward(x, cache).ok());
  const MoeRouting routing = layer.Routing(cache);
  // 7 tokens x 2 choices over 3 experts with capacity ceil(0.7 * 2 * 7 / 3) = 4 each: 12 kept at most.
  EXPECT_EQ(routing.capacity, 4);
  EXPECT_GT(routing.dropped, 0);
  std::int64_t kept = 0;
  for (std::int64_t t : routing.tokens_per_expert) {
    EXPECT_LE(t, routing.capacity);
    kept += t;
  }
  EXPECT_EQ(kept + routing.dropped, 7 * 2);
  CheckLayerGradients(layer, x);
}

TEST(LayerGradients, MixtureOfExpertsTopOneUnlimited) {
  Rng rng(7);
  MoeConfig config{.dim = 3, .hidden = 5, .experts = 4, .top_k = 1, .capacity_factor = 0};
  MoeLayer<double> layer("moe", config, rng, 0.6);
  Randomize(layer.Params(), 70);
  const Matrix<double> x = RandomMatrix(6, 3, 13);
  LayerCache<double> cache;
  ASSERT_TRUE(layer.Forward(x, cache).ok());
  EXPECT_EQ(layer.Routing(cache).dropped, 0);
  CheckLayerGradients(layer, x);
}

TEST(LayerGradients, SageMeanAggregation) {
  Rng rng(8);
  SageMeanLayer<double> layer("sage", 3, 4, rng);
  Randomize(layer.Params(), 80);
  // 3 targets (rows 0-2) among 6 sampled nodes; target 2 has no neighbours.
  Csr graph;
  graph.offsets = {0, 3, 5, 5};
  graph.neighbors = {1, 3, 4, 0, 5};
  CheckGradients([&](const Matrix<double>& x, LayerCache<double>& c) { return layer.Forward(x, graph, c); },
                 [&](const Matrix<double>& dy, const LayerCache<double>& c) { return layer.Backward(dy, c); },
                 layer.Params(), RandomMatrix(6, 3, 14), true);
}

TEST(LayerGradients, SageRejectsNeighbourOutsideTheBatch) {
  Rng rng(8);
  SageMeanLayer<double> layer("sage", 2, 2, rng);
  Csr graph;
  graph.offsets = {0, 1};
  graph.neighbors = {9};
  LayerCache<double> cache;
  EXPECT_EQ(layer.Forward(RandomMatrix(3, 2, 1), graph, cache).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayerGradients, SoftmaxCrossEntropy) {
  Matrix<double> logits = RandomMatrix(5, 4, 15, 2.0);
  const std::vector<std::int64_t> labels = {0, 3, 1, 1, 2};
  auto lg = SoftmaxCrossEntropy(logits, labels, 7.0);
  ASSERT_TRUE(lg.ok());
  constexpr double kEps = 1e-6;
  for (Eigen::Index i = 0; i < logits.size(); ++i) {
    const double keep = logits.data()[i];
    logits.data()[i] = keep + kEps;
    const double up = SoftmaxCrossEntropy(logits, labels, 7.0)->loss;
    logits.data()[i] = keep - kEps;
    const double down = SoftmaxCrossEntropy(logits, labels, 7.0)->loss;
    logits.data()[i] = keep;
    ExpectClose(lg->dlogits.data()[i], (up - down) / (2 * kEps), "logit " + std::to_string(i));
  }
  // The loss itself: the mean negative log-likelihood computed directly.
  double nll = 0;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    nll -= std::log(std::exp(logits(r, labels[static_cast<size_t>(r)])) / logits.row(r).array().exp().sum());
  }
  EXPECT_NEAR(lg->loss, nll / 7.0, 1e-12);
  EXPECT_EQ(SoftmaxCrossEntropy(logits, {0, 1}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testbed::train::testing
