// The LSTM layer: finite-difference gradients (BPTT), outputs against the recurrence written
// out by hand, independence of the sequences in a batch, float against double, shape errors.
#include "testbed/train/lstm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.h"

namespace testbed::train::testing {
namespace {

double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Away from saturation, so that every gate's gradient is non-trivial.
void Randomize(Lstm<double>& layer, std::uint64_t seed, double scale = 0.5) {
  for (Param<double>* p : layer.Params()) p->value = RandomMatrix(p->value.rows(), p->value.cols(), seed++, scale);
}

TEST(Lstm, ParametersFollowPyTorchShapesAndInitialisation) {
  Rng rng(1);
  Lstm<double> layer("lm.lstm", 3, 4, 2, rng);
  EXPECT_EQ(layer.kind(), "lstm");
  const std::vector<Param<double>*> params = layer.Params();
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[0]->name, "lm.lstm.weight_ih");
  EXPECT_EQ(params[1]->name, "lm.lstm.weight_hh");
  EXPECT_EQ(params[2]->name, "lm.lstm.bias");
  EXPECT_EQ(params[0]->value.rows(), 3);
  EXPECT_EQ(params[0]->value.cols(), 16);
  EXPECT_EQ(params[1]->value.rows(), 4);
  EXPECT_EQ(params[1]->value.cols(), 16);
  EXPECT_EQ(params[2]->value.rows(), 1);
  EXPECT_EQ(params[2]->value.cols(), 16);
  for (Param<double>* p : params) {
    EXPECT_LE(p->value.cwiseAbs().maxCoeff(), 0.5) << p->name;  // 1 / sqrt(4)
    EXPECT_GT(p->value.cwiseAbs().maxCoeff(), 0.25) << p->name;
  }
}

TEST(Lstm, GradientsMatchFiniteDifferences) {
  Rng rng(2);
  Lstm<double> layer("lstm", 3, 5, 4, rng);
  Randomize(layer, 30);
  CheckLayerGradients(layer, RandomMatrix(2 * 4, 3, 31));
}

TEST(Lstm, BackwardLeavesTheCacheAndAccumulates) {
  Rng rng(3);
  Lstm<double> layer("lstm", 2, 3, 3, rng);
  LayerCache<double> cache;
  ASSERT_TRUE(layer.Forward(RandomMatrix(6, 2, 40), cache).ok());
  const LayerCache<double> before = cache;
  const Matrix<double> dy = RandomMatrix(6, 3, 41);
  auto dx1 = layer.Backward(dy, cache);
  ASSERT_TRUE(dx1.ok()) << dx1.status();
  const Matrix<double> once = layer.weight_hh().grad;
  auto dx2 = layer.Backward(dy, cache);
  ASSERT_TRUE(dx2.ok()) << dx2.status();
  EXPECT_EQ(*dx1, *dx2);
  EXPECT_TRUE(layer.weight_hh().grad.isApprox(2 * once));
  ASSERT_EQ(cache.tensors.size(), before.tensors.size());
  for (size_t k = 0; k < cache.tensors.size(); ++k) EXPECT_EQ(cache.tensors[k], before.tensors[k]) << k;
}

TEST(Lstm, MatchesTheRecurrenceByHand) {
  Rng rng(4);
  Lstm<double> layer("lstm", 1, 1, 3, rng);
  const double wi[4] = {0.7, -0.4, 1.1, 0.3};  // input weights of gates i, f, g, o
  const double wh[4] = {-0.5, 0.8, 0.6, -0.9};
  const double b[4] = {0.1, 0.6, -0.2, 0.05};
  for (int k = 0; k < 4; ++k) {
    layer.weight_ih().value(0, k) = wi[k];
    layer.weight_hh().value(0, k) = wh[k];
    layer.bias().value(0, k) = b[k];
  }
  Matrix<double> x(6, 1);  // two sequences of three
  x << 0.5, -1.0, 2.0, -0.3, 0.0, 0.9;
  LayerCache<double> cache;
  auto y = layer.Forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->rows(), 6);
  ASSERT_EQ(y->cols(), 1);
  for (int s = 0; s < 2; ++s) {
    double h = 0, c = 0;
    for (int t = 0; t < 3; ++t) {
      const double in = x(3 * s + t, 0);
      const double i = Sigmoid(in * wi[0] + h * wh[0] + b[0]);
      const double f = Sigmoid(in * wi[1] + h * wh[1] + b[1]);
      const double g = std::tanh(in * wi[2] + h * wh[2] + b[2]);
      const double o = Sigmoid(in * wi[3] + h * wh[3] + b[3]);
      c = f * c + i * g;
      h = o * std::tanh(c);
      EXPECT_NEAR((*y)(3 * s + t, 0), h, 1e-14) << "sequence " << s << ", step " << t;
    }
  }
}

TEST(Lstm, SequencesAreIndependent) {
  Rng rng(5);
  Lstm<double> layer("lstm", 2, 3, 4, rng);
  Randomize(layer, 50);
  Matrix<double> x = RandomMatrix(3 * 4, 2, 51);
  LayerCache<double> cache;
  auto y = layer.Forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  x.middleRows(4, 4) = RandomMatrix(4, 2, 52);  // sequence 1 only
  auto changed = layer.Forward(x, cache);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->topRows(4), y->topRows(4));
  EXPECT_EQ(changed->bottomRows(4), y->bottomRows(4));
  EXPECT_NE(changed->middleRows(4, 4), y->middleRows(4, 4));
}

TEST(Lstm, OneStepStartsFromZeroState) {
  Rng rng(6);
  Lstm<double> layer("lstm", 3, 4, 1, rng);
  Randomize(layer, 60);
  const Matrix<double> x = RandomMatrix(5, 3, 61);
  LayerCache<double> cache;
  auto y = layer.Forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  // h_{-1} = c_{-1} = 0: no recurrent term, no forget gate, whatever weight_hh holds.
  const Matrix<double> pre = (x * layer.weight_ih().value).rowwise() + layer.bias().value.row(0);
  for (Eigen::Index r = 0; r < 5; ++r) {
    for (Eigen::Index j = 0; j < 4; ++j) {
      const double i = Sigmoid(pre(r, j)), g = std::tanh(pre(r, 8 + j)), o = Sigmoid(pre(r, 12 + j));
      EXPECT_NEAR((*y)(r, j), o * std::tanh(i * g), 1e-14) << r << ", " << j;
    }
  }
}

TEST(Lstm, FloatMatchesDouble) {
  Rng rng(7);
  Lstm<double> exact("lstm", 4, 6, 5, rng);
  Randomize(exact, 70);
  Lstm<float> single("lstm", 4, 6, 5, rng);
  for (size_t k = 0; k < 3; ++k) single.Params()[k]->value = exact.Params()[k]->value.cast<float>();
  const Matrix<double> x = RandomMatrix(2 * 5, 4, 71);
  const Matrix<double> dy = RandomMatrix(2 * 5, 6, 72);
  LayerCache<double> cd;
  LayerCache<float> cf;
  auto yd = exact.Forward(x, cd);
  auto yf = single.Forward(x.cast<float>(), cf);
  ASSERT_TRUE(yd.ok() && yf.ok());
  EXPECT_LE((yf->cast<double>() - *yd).cwiseAbs().maxCoeff(), 1e-5);
  auto dxd = exact.Backward(dy, cd);
  auto dxf = single.Backward(dy.cast<float>(), cf);
  ASSERT_TRUE(dxd.ok() && dxf.ok());
  EXPECT_LE((dxf->cast<double>() - *dxd).cwiseAbs().maxCoeff(), 1e-5);
  for (size_t k = 0; k < 3; ++k) {
    const Matrix<double>& g = exact.Params()[k]->grad;
    EXPECT_LE((single.Params()[k]->grad.cast<double>() - g).cwiseAbs().maxCoeff(), 1e-4 * (1 + g.cwiseAbs().maxCoeff()))
        << exact.Params()[k]->name;
  }
}

TEST(Lstm, CloneIsADeepCopy) {
  Rng rng(8);
  Lstm<double> layer("lstm", 2, 2, 2, rng);
  std::unique_ptr<Layer<double>> copy = layer.Clone();
  copy->Params()[0]->value.setZero();
  EXPECT_NE(layer.weight_ih().value, copy->Params()[0]->value);
  EXPECT_EQ(copy->kind(), "lstm");
}

TEST(Lstm, RejectsBadShapesAndQuantisation) {
  Rng rng(9);
  Lstm<double> layer("enc", 3, 4, 4, rng);
  LayerCache<double> cache;
  auto partial = layer.Forward(RandomMatrix(6, 3, 90), cache);  // 6 rows: not whole sequences of 4
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(partial.status().message().find("enc"), std::string::npos) << partial.status();
  auto narrow = layer.Forward(RandomMatrix(8, 2, 91), cache);
  EXPECT_EQ(narrow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(narrow.status().message().find("enc"), std::string::npos) << narrow.status();

  EXPECT_EQ(layer.Backward(RandomMatrix(8, 4, 92), LayerCache<double>{}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(layer.Forward(RandomMatrix(8, 3, 93), cache).ok());
  EXPECT_EQ(layer.Backward(RandomMatrix(8, 5, 94), cache).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.Backward(RandomMatrix(4, 4, 95), cache).status().code(), absl::StatusCode::kInvalidArgument);

  LayerQuant q;
  EXPECT_TRUE(layer.SetQuantization(q).ok());
  q.weight_bits = 8;
  const absl::Status st = layer.SetQuantization(q);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("enc"), std::string::npos) << st;
}

}  // namespace
}  // namespace testbed::train::testing
