// Every layer's backward pass against finite differences of its forward pass (double
// precision), for the input and every parameter. Parameters are randomised first so that
// no gradient is trivially zero (biases, layer-norm shift and scale). The quantised Conv2d
// against a direct convolution over the rounded tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "gradient_check.h"
#include "testbed/train/attention.h"
#include "testbed/train/column_parallel_linear.h"
#include "testbed/train/conv2d.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/embedding.h"
#include "testbed/train/gelu.h"
#include "testbed/train/layer_norm.h"
#include "testbed/train/linear.h"
#include "testbed/train/moe_layer.h"
#include "testbed/train/pool2d.h"
#include "testbed/train/relu.h"
#include "testbed/train/row_parallel_linear.h"
#include "testbed/train/gat_layer.h"
#include "testbed/train/gcn_layer.h"
#include "testbed/train/sage_layer.h"
#include "testbed/train/sequential_model.h"
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

TEST(LayerGradients, Relu) {
  Relu<double> layer;
  CheckLayerGradients(layer, RandomMatrix(4, 6, 16, 2.0));
}

TEST(LayerGradients, Conv2dSamePaddingWithBias) {
  Rng rng(9);
  // 2 samples, 3 channels of 5 x 4 (non-square), 3x3 kernel, stride 1, padding 1: 4 x 5 x 4 out.
  Conv2d<double> layer("conv", 3, 4, 5, 4, 3, 1, 1, true, rng);
  ASSERT_EQ(layer.out_height(), 5);
  ASSERT_EQ(layer.out_width(), 4);
  Randomize(layer.Params(), 90);
  CheckLayerGradients(layer, RandomMatrix(2, 3 * 5 * 4, 17));
}

TEST(LayerGradients, Conv2dStrideTwoNoPaddingWithoutBias) {
  Rng rng(9);
  // 3 samples, 2 channels of 7 x 6, 3x3 kernel, stride 2, no padding: 3 x 3 x 2 out.
  Conv2d<double> layer("conv", 2, 3, 7, 6, 3, 2, 0, false, rng);
  ASSERT_EQ(layer.out_height(), 3);
  ASSERT_EQ(layer.out_width(), 2);
  ASSERT_EQ(layer.Params().size(), 1u);
  CheckLayerGradients(layer, RandomMatrix(3, 2 * 7 * 6, 18));
}

TEST(LayerGradients, Conv2dStrideTwoPaddingOneWithBias) {
  Rng rng(9);
  // Even input, even kernel: windows overlap the padding on one side only.
  Conv2d<double> layer("conv", 2, 2, 4, 6, 2, 2, 1, true, rng);
  ASSERT_EQ(layer.out_height(), 3);
  ASSERT_EQ(layer.out_width(), 4);
  Randomize(layer.Params(), 95);
  CheckLayerGradients(layer, RandomMatrix(2, 2 * 4 * 6, 19));
}

TEST(LayerGradients, Conv2dMatchesAHandComputedOutput) {
  // 1 channel, x = [1 2 3; 4 5 6; 7 8 9], kernel [1 2; 3 4] (a cross-correlation, as
  // every deep-learning framework computes it). Float, so the GEMM backend path is used.
  Rng rng(1);
  Matrix<float> x(1, 9);
  x << 1, 2, 3, 4, 5, 6, 7, 8, 9;
  Conv2d<float> valid("conv", 1, 1, 3, 3, 2, 1, 0, true, rng);
  valid.weight().value << 1, 2, 3, 4;
  valid.bias().value << 0.5f;
  LayerCache<float> cache;
  auto y = valid.Forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  Matrix<float> expected(1, 4);
  // 1+4+12+20, 2+6+15+24, 4+10+21+32, 5+12+24+36, plus the bias.
  expected << 37.5f, 47.5f, 67.5f, 77.5f;
  EXPECT_EQ(*y, expected);

  // Padding 1, stride 2: the taps at (-1, *) and (*, -1) read zeros.
  Conv2d<float> padded("conv", 1, 1, 3, 3, 2, 2, 1, false, rng);
  padded.weight().value << 1, 2, 3, 4;
  y = padded.Forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  // 1*4, 2*3+3*4, 4*2+7*4, 5*1+6*2+8*3+9*4.
  expected << 4, 18, 36, 77;
  EXPECT_EQ(*y, expected);
}

TEST(LayerGradients, Conv2dCountsAndShapes) {
  Rng rng(1);
  Conv2d<float> layer("conv", 3, 8, 28, 28, 5, 1, 2, true, rng);
  EXPECT_EQ(layer.kind(), "conv2d");
  EXPECT_EQ(layer.out_channels(), 8);
  EXPECT_EQ(layer.out_height(), 28);
  EXPECT_EQ(layer.out_width(), 28);
  EXPECT_EQ(layer.MacsPerSample(), std::int64_t{8} * 28 * 28 * 3 * 5 * 5);
  EXPECT_EQ(layer.NumParameters(), 8 * 3 * 5 * 5 + 8);
  EXPECT_EQ(layer.weight().value.rows(), 8);
  EXPECT_EQ(layer.weight().value.cols(), 3 * 5 * 5);
  EXPECT_EQ(layer.bias().value.cols(), 8);
  std::int64_t params = 0;
  for (Param<float>* p : layer.Params()) params += p->size();
  EXPECT_EQ(params, layer.NumParameters());
  // Default init: N(0, 1/(3*5*5)), so the sample standard deviation is close to 0.115.
  const Matrix<float>& w = layer.weight().value;
  const double var = (w.array() - w.mean()).square().mean();
  EXPECT_NEAR(std::sqrt(var), 1.0 / std::sqrt(75.0), 0.02);
  auto clone = layer.Clone();
  EXPECT_EQ(static_cast<Conv2d<float>&>(*clone).weight().value, w);

  LayerCache<float> cache;
  EXPECT_EQ(layer.Forward(Matrix<float>::Zero(2, 3 * 28 * 27), cache).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(layer.Forward(Matrix<float>::Zero(2, 3 * 28 * 28), cache).ok());
  EXPECT_EQ(layer.Backward(Matrix<float>::Zero(3, 8 * 28 * 28), cache).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.Backward(Matrix<float>::Zero(2, 8), cache).status().code(), absl::StatusCode::kInvalidArgument);
  Conv2d<float> too_big("conv", 1, 1, 3, 3, 5, 1, 0, false, rng);
  auto status = too_big.Forward(Matrix<float>::Zero(1, 9), cache).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("does not fit"), std::string::npos) << status;
  Conv2d<float> no_stride("conv", 1, 1, 3, 3, 1, 0, 0, false, rng);
  EXPECT_EQ(no_stride.Forward(Matrix<float>::Zero(1, 9), cache).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayerGradients, Conv2dFloatAgreesWithDouble) {
  Rng rng_f(3), rng_d(3);
  Conv2d<float> f("conv", 2, 3, 6, 5, 3, 2, 1, true, rng_f);
  Conv2d<double> d("conv", 2, 3, 6, 5, 3, 2, 1, true, rng_d);
  Randomize(d.Params(), 100);
  f.weight().value = d.weight().value.cast<float>();
  f.bias().value = d.bias().value.cast<float>();
  const Matrix<double> x = RandomMatrix(3, 2 * 6 * 5, 21);
  const Matrix<double> dy = RandomMatrix(3, 3 * 3 * 3, 22);
  LayerCache<float> cf;
  LayerCache<double> cd;
  auto yf = f.Forward(x.cast<float>(), cf);
  auto yd = d.Forward(x, cd);
  ASSERT_TRUE(yf.ok() && yd.ok());
  EXPECT_LT((yf->cast<double>() - *yd).cwiseAbs().maxCoeff(), 1e-5);
  auto dxf = f.Backward(dy.cast<float>(), cf);
  auto dxd = d.Backward(dy, cd);
  ASSERT_TRUE(dxf.ok() && dxd.ok());
  EXPECT_LT((dxf->cast<double>() - *dxd).cwiseAbs().maxCoeff(), 1e-5);
  EXPECT_LT((f.weight().grad.cast<double>() - d.weight().grad).cwiseAbs().maxCoeff(), 1e-4);
  EXPECT_LT((f.bias().grad.cast<double>() - d.bias().grad).cwiseAbs().maxCoeff(), 1e-4);
}

// Quantised Conv2d (the same semantics as Linear). The reference is a direct convolution in
// double over the rounded tensors: y from Q_a(x) and Q_w(W); straight through, dL/dW from the
// patches of Q_a(x) and the rounded dL/dy, dL/dx through Q_w(W), dL/db the sum of the rounded
// dL/dy.
struct ConvReference {
  Matrix<double> y, dx, dw, db;
};

ConvReference DirectConv(const Conv2dShape& s, const Matrix<double>& x, const Matrix<double>& w,
                         const Matrix<double>& b, const Matrix<double>& g) {
  const std::int64_t oh_n = s.out_height(), ow_n = s.out_width(), k = s.kernel;
  ConvReference r;
  r.y = Matrix<double>::Zero(x.rows(), s.output_size());
  r.dx = Matrix<double>::Zero(x.rows(), s.input_size());
  r.dw = Matrix<double>::Zero(w.rows(), w.cols());
  r.db = Matrix<double>::Zero(1, s.out_channels);
  for (Eigen::Index n = 0; n < x.rows(); ++n) {
    for (std::int64_t oc = 0; oc < s.out_channels; ++oc) {
      for (std::int64_t oh = 0; oh < oh_n; ++oh) {
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          const std::int64_t out = (oc * oh_n + oh) * ow_n + ow;
          double acc = b(0, oc);
          const double grad = g(n, out);
          r.db(0, oc) += grad;
          for (std::int64_t c = 0; c < s.in_channels; ++c) {
            for (std::int64_t kh = 0; kh < k; ++kh) {
              for (std::int64_t kw = 0; kw < k; ++kw) {
                const std::int64_t ih = oh * s.stride - s.padding + kh, iw = ow * s.stride - s.padding + kw;
                if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
                const std::int64_t in = (c * s.height + ih) * s.width + iw, tap = (c * k + kh) * k + kw;
                acc += w(oc, tap) * x(n, in);
                r.dw(oc, tap) += grad * x(n, in);
                r.dx(n, in) += grad * w(oc, tap);
              }
            }
          }
          r.y(n, out) = acc;
        }
      }
    }
  }
  return r;
}

TEST(QuantizedConv2d, FullPrecisionIsTheUnquantisedLayerBitForBit) {
  Rng a(2), b(2);
  Conv2d<float> plain("conv", 2, 3, 6, 5, 3, 1, 1, true, a), q("conv", 2, 3, 6, 5, 3, 1, 1, true, b);
  ASSERT_TRUE(q.SetQuantization(LayerQuant{}).ok());
  const Matrix<float> x = RandomMatrix(4, 2 * 6 * 5, 31).cast<float>();
  const Matrix<float> dy = RandomMatrix(4, 3 * 6 * 5, 32).cast<float>();
  LayerCache<float> c1, c2;
  auto y1 = plain.Forward(x, c1), y2 = q.Forward(x, c2);
  ASSERT_TRUE(y1.ok() && y2.ok());
  EXPECT_EQ(std::memcmp(y1->data(), y2->data(), sizeof(float) * static_cast<size_t>(y1->size())), 0);
  auto d1 = plain.Backward(dy, c1), d2 = q.Backward(dy, c2);
  ASSERT_TRUE(d1.ok() && d2.ok());
  EXPECT_EQ(std::memcmp(d1->data(), d2->data(), sizeof(float) * static_cast<size_t>(d1->size())), 0);
  const Matrix<float>& gw1 = plain.weight().grad;
  EXPECT_EQ(std::memcmp(gw1.data(), q.weight().grad.data(), sizeof(float) * static_cast<size_t>(gw1.size())), 0);
  EXPECT_EQ(std::memcmp(plain.bias().grad.data(), q.bias().grad.data(), sizeof(float) * 3), 0);
}

TEST(QuantizedConv2d, StraightThroughBackwardAtEightAndFourBits) {
  for (int bits : {8, 4}) {
    Rng rng(7);
    // 3 samples, 2 channels of 5 x 4, 3x3 kernel, stride 2, padding 1: 3 channels of 3 x 2.
    Conv2d<double> layer("conv", 2, 3, 5, 4, 3, 2, 1, true, rng);
    layer.bias().value = RandomMatrix(1, 3, 41);
    LayerQuant q;
    q.weight_bits = bits;
    q.activation_bits = bits;
    q.gradient_bits = 32;
    ASSERT_TRUE(layer.SetQuantization(q).ok());
    const Matrix<double> x = RandomMatrix(3, 2 * 5 * 4, 42);
    const Matrix<double> dy = RandomMatrix(3, layer.shape().output_size(), 43);
    const Matrix<double> xq = FakeQuantize(x, bits, Rounding::kNearest, nullptr);
    const Matrix<double> wq = FakeQuantize(layer.weight().value, bits, Rounding::kNearest, nullptr);
    const ConvReference ref = DirectConv(layer.shape(), xq, wq, layer.bias().value, dy);
    LayerCache<double> cache;
    auto y = layer.Forward(x, cache);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_LT((*y - ref.y).cwiseAbs().maxCoeff(), 1e-12) << bits << " bits";
    auto dx = layer.Backward(dy, cache);
    ASSERT_TRUE(dx.ok()) << dx.status();
    EXPECT_LT((*dx - ref.dx).cwiseAbs().maxCoeff(), 1e-12) << bits << " bits";
    EXPECT_LT((layer.weight().grad - ref.dw).cwiseAbs().maxCoeff(), 1e-12) << bits << " bits";
    EXPECT_LT((layer.bias().grad - ref.db).cwiseAbs().maxCoeff(), 1e-12) << bits << " bits";
    // Quantisation changed the answer (the test would pass vacuously otherwise).
    const ConvReference exact = DirectConv(layer.shape(), x, layer.weight().value, layer.bias().value, dy);
    EXPECT_GT((exact.y - ref.y).cwiseAbs().maxCoeff(), bits == 8 ? 1e-4 : 1e-2) << bits << " bits";
  }
}

// The output gradient is rounded before both backward products: to the nearest point, or
// stochastically with the layer's own Rng seeded from the setting's seed.
TEST(QuantizedConv2d, TheOutputGradientIsRoundedWithTheLayersRng) {
  for (Rounding rounding : {Rounding::kNearest, Rounding::kStochastic}) {
    Rng rng(8);
    Conv2d<double> layer("conv", 1, 2, 4, 4, 3, 1, 1, true, rng);
    LayerQuant q;
    q.weight_bits = 6;
    q.activation_bits = 6;
    q.gradient_bits = 5;
    q.gradient_rounding = rounding;
    q.seed = 77;
    ASSERT_TRUE(layer.SetQuantization(q).ok());
    const Matrix<double> x = RandomMatrix(2, 16, 51), dy = RandomMatrix(2, 2 * 16, 52);
    Rng same(77);
    const Matrix<double> gq = FakeQuantize(dy, 5, rounding, &same);
    const ConvReference ref =
        DirectConv(layer.shape(), FakeQuantize(x, 6, Rounding::kNearest, nullptr),
                   FakeQuantize(layer.weight().value, 6, Rounding::kNearest, nullptr), layer.bias().value, gq);
    LayerCache<double> cache;
    ASSERT_TRUE(layer.Forward(x, cache).ok());
    auto dx = layer.Backward(dy, cache);
    ASSERT_TRUE(dx.ok()) << dx.status();
    EXPECT_LT((*dx - ref.dx).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_LT((layer.weight().grad - ref.dw).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_LT((layer.bias().grad - ref.db).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_GT((gq - dy).cwiseAbs().maxCoeff(), 1e-3);
  }
}

TEST(QuantizedConv2d, AnUnsupportedWidthIsRefusedAndNamed) {
  Rng rng(1);
  Conv2d<float> layer("conv3", 1, 1, 4, 4, 3, 1, 1, false, rng);
  LayerQuant q;
  q.weight_bits = 12;
  const absl::Status st = layer.SetQuantization(q);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("conv3: weight width: 12 bits"), std::string::npos) << st;
}

TEST(LayerGradients, MaxPool2d) {
  // 2 samples, 3 channels of 6 x 5, 2x2 windows with stride 2 (disjoint) and 3x3 with stride 2
  // (overlapping: an input can be the maximum of two windows).
  MaxPool2d<double> disjoint("pool", 3, 6, 5, 2, 2);
  ASSERT_EQ(disjoint.out_height(), 3);
  ASSERT_EQ(disjoint.out_width(), 2);
  CheckLayerGradients(disjoint, RandomMatrix(2, 3 * 6 * 5, 23));
  MaxPool2d<double> overlapping("pool", 3, 6, 5, 3, 2);
  ASSERT_EQ(overlapping.out_height(), 2);
  ASSERT_EQ(overlapping.out_width(), 2);
  CheckLayerGradients(overlapping, RandomMatrix(2, 3 * 6 * 5, 24));
}

TEST(LayerGradients, MaxPool2dPicksAndRoutesToTheMaximum) {
  // 1 channel of 4 x 4, 2x2 windows, stride 2.
  MaxPool2d<double> pool("pool", 1, 4, 4, 2, 2);
  Matrix<double> x(1, 16);
  x << 1, 5, 2, 0,   //
      3, 4, 8, 1,    //
      -1, -2, 6, 7,  //
      -3, -4, 9, 6;
  LayerCache<double> cache;
  auto y = pool.Forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  Matrix<double> expected(1, 4);
  expected << 5, 8, -1, 9;
  EXPECT_EQ(*y, expected);
  ASSERT_EQ(cache.indices.size(), 1u);
  EXPECT_EQ(cache.indices[0], (std::vector<std::int64_t>{1, 6, 8, 14}));
  Matrix<double> dy(1, 4);
  dy << 10, 20, 30, 40;
  auto dx = pool.Backward(dy, cache);
  ASSERT_TRUE(dx.ok()) << dx.status();
  Matrix<double> dx_expected = Matrix<double>::Zero(1, 16);
  dx_expected(0, 1) = 10;
  dx_expected(0, 6) = 20;
  dx_expected(0, 8) = 30;
  dx_expected(0, 14) = 40;
  EXPECT_EQ(*dx, dx_expected);
  EXPECT_EQ(pool.Forward(Matrix<double>::Zero(1, 15), cache).status().code(), absl::StatusCode::kInvalidArgument);
  MaxPool2d<double> too_big("pool", 1, 2, 2, 3, 1);
  EXPECT_EQ(too_big.Forward(Matrix<double>::Zero(1, 4), cache).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayerGradients, LayerNormNormalisesEachSampleOfAFeatureMap) {
  // LayerNorm over a [batch, C*H*W] row normalises each sample over all its channels and
  // pixels (what a CNN needs without batch statistics); gamma and beta are per element.
  LayerNorm<double> ln("ln", 3 * 4 * 5);
  LayerCache<double> cache;
  const Matrix<double> x = (RandomMatrix(2, 3 * 4 * 5, 25, 4.0).array() + 3.0).matrix();
  auto y = ln.Forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  for (Eigen::Index r = 0; r < y->rows(); ++r) {
    EXPECT_NEAR(y->row(r).mean(), 0.0, 1e-12);
    EXPECT_NEAR((y->row(r).array() - y->row(r).mean()).square().mean(), 1.0, 1e-4);
  }
}

// conv(2->3, 3x3, pad 1) [-> layer norm] -> relu -> pool(2) -> conv(3->4, 3x3, pad 1) -> relu
// -> pool(2) -> linear(4*2*2 -> 3) on 2-channel 8 x 9 inputs.
SequentialModel<double> SmallCnn(bool with_norm) {
  Rng rng(11);
  SequentialModel<double> model;
  model.Add(std::make_unique<Conv2d<double>>("conv1", 2, 3, 8, 9, 3, 1, 1, true, rng));
  if (with_norm) model.Add(std::make_unique<LayerNorm<double>>("norm1", 3 * 8 * 9));
  model.Add(std::make_unique<Relu<double>>());
  model.Add(std::make_unique<MaxPool2d<double>>("pool1", 3, 8, 9, 2, 2));  // 3 x 4 x 4
  model.Add(std::make_unique<Conv2d<double>>("conv2", 3, 4, 4, 4, 3, 1, 1, true, rng));
  model.Add(std::make_unique<Relu<double>>());
  model.Add(std::make_unique<MaxPool2d<double>>("pool2", 4, 4, 4, 2, 2));  // 4 x 2 x 2
  model.Add(std::make_unique<Linear<double>>("head", 4 * 2 * 2, 3, true, rng));
  return model;
}

void CheckCnnGradients(bool with_norm) {
  SequentialModel<double> model = SmallCnn(with_norm);
  Randomize(model.Params(), 110);
  CheckGradients(
      [&](const Matrix<double>& x, LayerCache<double>& c) { return model.Forward(x, c.children); },
      [&](const Matrix<double>& dy, const LayerCache<double>& c) { return model.Backward(dy, c.children); },
      model.Params(), RandomMatrix(2, 2 * 8 * 9, 26), true);
}

TEST(LayerGradients, SmallCnnChain) { CheckCnnGradients(false); }

TEST(LayerGradients, SmallCnnChainWithLayerNorm) { CheckCnnGradients(true); }

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

TEST(LayerGradients, GcnRenormalisedAggregation) {
  Rng rng(9);
  GcnLayer<double> layer("gcn", 3, 4, rng);
  Randomize(layer.Params(), 81);
  // 3 targets among 6 rows, as for SAGE; each row's degree in the whole graph.
  Csr graph;
  graph.offsets = {0, 3, 5, 5};
  graph.neighbors = {1, 3, 4, 0, 5};
  const std::vector<std::int64_t> degrees = {3, 2, 0, 4, 1, 6};
  CheckGradients(
      [&](const Matrix<double>& x, LayerCache<double>& c) { return layer.Forward(x, graph, degrees, c); },
      [&](const Matrix<double>& dy, const LayerCache<double>& c) { return layer.Backward(dy, c); }, layer.Params(),
      RandomMatrix(6, 3, 15), true);
  // The value against the formula: target 0 reads itself and rows 1, 3, 4.
  LayerCache<double> cache;
  const Matrix<double> x = RandomMatrix(6, 3, 16);
  auto y = layer.Forward(x, graph, degrees, cache);
  ASSERT_TRUE(y.ok());
  const std::vector<Param<double>*> w = layer.Params();
  Matrix<double> expect = x.row(0) / 4.0 + x.row(1) / std::sqrt(4.0 * 3.0) + x.row(3) / std::sqrt(4.0 * 5.0) +
                          x.row(4) / std::sqrt(4.0 * 2.0);
  expect = expect * w[0]->value + w[1]->value;
  for (Eigen::Index c = 0; c < 4; ++c) EXPECT_NEAR((*y)(0, c), expect(0, c), 1e-12);
  // Target 2 has no neighbours: its own row alone, weighted 1 / (0 + 1).
  const Matrix<double> alone = x.row(2) * w[0]->value + w[1]->value;
  for (Eigen::Index c = 0; c < 4; ++c) EXPECT_NEAR((*y)(2, c), alone(0, c), 1e-12);
  EXPECT_FALSE(layer.Forward(x, graph, std::vector<std::int64_t>{1, 2}, cache).ok());  // degrees per row
}

// A small irregular graph for GAT: 3 targets among 5 rows; target 0 reads rows 1, 3, 4 (3 is
// no target), target 1 reads row 0, target 2 has no neighbours (its self-loop alone).
Csr GatTestGraph() {
  Csr graph;
  graph.offsets = {0, 3, 4, 4};
  graph.neighbors = {1, 3, 4, 0};
  return graph;
}

void CheckGatGradients(GatCombine combine, std::int64_t heads, std::uint64_t seed) {
  Rng rng(seed);
  GatLayer<double> layer("gat", 3, 4, heads, combine, rng);
  ASSERT_EQ(layer.Params().size(), 4u);
  Randomize(layer.Params(), seed * 10);
  const Csr graph = GatTestGraph();
  const Matrix<double> x = RandomMatrix(5, 3, seed + 1);
  // Both sides of the LeakyReLU must be checked where the softmax has a gradient: among the
  // scores of the targets with neighbours, some positive and some negative.
  const std::vector<Param<double>*> p = layer.Params();
  const Matrix<double> z = x * p[0]->value;
  int positive = 0, negative = 0;
  for (std::int64_t i = 0; i < 2; ++i) {
    std::vector<std::int64_t> reads = {i};
    for (std::int64_t e = graph.offsets[i]; e < graph.offsets[i + 1]; ++e) reads.push_back(graph.neighbors[e]);
    for (Eigen::Index k = 0; k < heads; ++k) {
      for (std::int64_t j : reads) {
        const double u =
            z.row(i).segment(4 * k, 4).dot(p[2]->value.row(k)) + z.row(j).segment(4 * k, 4).dot(p[1]->value.row(k));
        (u > 0 ? positive : negative) += 1;
      }
    }
  }
  EXPECT_GE(positive, 2);
  EXPECT_GE(negative, 2);
  CheckGradients([&](const Matrix<double>& in, LayerCache<double>& c) { return layer.Forward(in, graph, c); },
                 [&](const Matrix<double>& dy, const LayerCache<double>& c) { return layer.Backward(dy, c); },
                 layer.Params(), x, true);
}

TEST(LayerGradients, GatConcatenatedHeads) { CheckGatGradients(GatCombine::kConcat, 2, 21); }

TEST(LayerGradients, GatAveragedHeads) { CheckGatGradients(GatCombine::kMean, 3, 12); }

TEST(LayerGradients, GatWithZeroAttentionAveragesItsNeighbourhood) {
  const Csr graph = GatTestGraph();
  const Matrix<double> x = RandomMatrix(5, 3, 17);
  // Each target's rows, self first: the closed form is the mean of z over them, plus bias.
  const std::vector<std::vector<Eigen::Index>> reads = {{0, 1, 3, 4}, {1, 0}, {2}};
  for (GatCombine combine : {GatCombine::kConcat, GatCombine::kMean}) {
    Rng rng(13);
    GatLayer<double> layer("gat", 3, 4, 2, combine, rng);
    Randomize(layer.Params(), 90);
    const std::vector<Param<double>*> p = layer.Params();
    p[1]->value.setZero();
    p[2]->value.setZero();
    LayerCache<double> cache;
    auto y = layer.Forward(x, graph, cache);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->cols(), layer.out_cols());
    const Matrix<double> z = x * p[0]->value;  // [5, 2 heads * 4]
    for (size_t i = 0; i < reads.size(); ++i) {
      Matrix<double> mean = Matrix<double>::Zero(1, 8);
      for (Eigen::Index j : reads[i]) mean += z.row(j) / static_cast<double>(reads[i].size());
      const Matrix<double> expect =
          (combine == GatCombine::kConcat ? mean : Matrix<double>((mean.leftCols(4) + mean.rightCols(4)) / 2.0)) +
          p[3]->value;
      for (Eigen::Index c = 0; c < expect.cols(); ++c) {
        EXPECT_NEAR((*y)(static_cast<Eigen::Index>(i), c), expect(0, c), 1e-12) << "target " << i << " column " << c;
      }
    }
  }
}

TEST(LayerGradients, GatRejectsMalformedInputsNamingTheLayer) {
  Rng rng(14);
  GatLayer<double> layer("gat7", 3, 2, 2, GatCombine::kConcat, rng, /*bias=*/false);
  EXPECT_EQ(layer.Params().size(), 3u);
  const Matrix<double> x = RandomMatrix(5, 3, 18);
  auto expect_invalid = [&](const Matrix<double>& in, const Csr& graph, const char* what) {
    LayerCache<double> cache;
    auto y = layer.Forward(in, graph, cache);
    ASSERT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_NE(y.status().message().find("gat7"), std::string::npos) << what << ": " << y.status();
  };
  Csr g = GatTestGraph();
  expect_invalid(RandomMatrix(5, 4, 1), g, "input width");
  g.offsets = {1, 3, 4, 4};
  expect_invalid(x, g, "offsets not from 0");
  g.offsets = {0, 3, 4, 3};
  expect_invalid(x, g, "offsets not ending at the neighbours");
  g.offsets = {0, 3, 2, 4};
  expect_invalid(x, g, "decreasing offsets");
  g = GatTestGraph();
  g.neighbors[2] = 5;
  expect_invalid(x, g, "neighbour outside x");
  g = GatTestGraph();
  expect_invalid(RandomMatrix(2, 3, 2), g, "more targets than rows");
  // Backward: no cache, then an output gradient of the wrong shape.
  LayerCache<double> cache;
  EXPECT_EQ(layer.Backward(Matrix<double>::Zero(3, 4), cache).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(layer.Forward(x, GatTestGraph(), cache).ok());
  EXPECT_EQ(layer.Backward(Matrix<double>::Zero(3, 2), cache).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.Backward(Matrix<double>::Zero(2, 4), cache).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(layer.Backward(Matrix<double>::Zero(3, 4), cache).ok());
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
