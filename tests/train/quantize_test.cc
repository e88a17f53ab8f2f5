// Fake quantisation against its definition: nearest rounding within half a grid step,
// stochastic rounding unbiased and on the two neighbouring grid points, 32 bits the identity
// bit for bit, bfloat16 within half an ulp; the quantised Linear layer's forward and its
// straight-through backward against the formulas computed by hand, and the full-precision
// layer unchanged.
#include "testbed/train/quantize.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "testbed/train/linear.h"

namespace testbed::train {
namespace {

Matrix<double> RandomMatrix(Eigen::Index r, Eigen::Index c, std::uint64_t seed, bool non_negative = false) {
  Rng rng(seed);
  Matrix<double> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = non_negative ? std::fabs(rng.Normal()) : rng.Normal();
  return m;
}

TEST(Quantize, SupportedWidths) {
  for (int b : {2, 3, 4, 5, 6, 7, 8, 16, 32}) EXPECT_TRUE(SupportedBits(b)) << b;
  for (int b : {-1, 0, 1, 9, 12, 15, 17, 31, 33, 64}) EXPECT_FALSE(SupportedBits(b)) << b;
  absl::Status st = CheckBits(12, "layer fc1: weight width");
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("layer fc1: weight width: 12 bits; expected 2 to 8, 16 or 32"));
}

TEST(Quantize, StepIsTheLargestMagnitudeOverTheTopLevel) {
  Matrix<double> s(1, 3);
  s << -2.0, 0.5, 1.0;
  EXPECT_DOUBLE_EQ(QuantStep(s, 4), 2.0 / 7);  // symmetric: -7..7
  Matrix<double> u(1, 3);
  u << 0.0, 0.5, 3.0;
  EXPECT_DOUBLE_EQ(QuantStep(u, 4), 3.0 / 15);  // unsigned: 0..15
  EXPECT_EQ(QuantStep(Matrix<double>::Zero(2, 2).eval(), 8), 0.0);
}

TEST(Quantize, NearestRoundingIsWithinHalfAStepAndOnTheGrid) {
  for (bool non_negative : {false, true}) {
    const Matrix<double> x = RandomMatrix(37, 23, 5, non_negative);
    for (int bits = 2; bits <= 8; ++bits) {
      const double step = QuantStep(x, bits);
      const Matrix<double> q = FakeQuantize(x, bits, Rounding::kNearest, nullptr);
      const int top = non_negative ? (1 << bits) - 1 : (1 << (bits - 1)) - 1;
      for (Eigen::Index i = 0; i < x.size(); ++i) {
        EXPECT_LE(std::fabs(q.data()[i] - x.data()[i]), step / 2 * (1 + 1e-12)) << bits;
        const double level = q.data()[i] / step;
        EXPECT_NEAR(level, std::round(level), 1e-9);
        EXPECT_LE(std::fabs(level), top + 1e-9);
        if (non_negative) EXPECT_GE(level, -1e-12);
      }
    }
  }
}

TEST(Quantize, StochasticRoundingIsUnbiasedAndPicksANeighbour) {
  const Matrix<double> x = RandomMatrix(4, 5, 11);
  const int bits = 3;
  const double step = QuantStep(x, bits);
  Rng rng(99);
  constexpr int kDraws = 40000;
  Matrix<double> sum = Matrix<double>::Zero(x.rows(), x.cols());
  for (int d = 0; d < kDraws; ++d) {
    const Matrix<double> q = FakeQuantize(x, bits, Rounding::kStochastic, &rng);
    for (Eigen::Index i = 0; i < x.size(); ++i) {
      const double lo = std::floor(x.data()[i] / step) * step;
      const double v = q.data()[i];
      ASSERT_TRUE(std::fabs(v - lo) < 1e-9 || std::fabs(v - (lo + step)) < 1e-9) << v << " vs " << x.data()[i];
    }
    sum += q;
  }
  // Each draw's error is at most one step, so the mean of kDraws lies within 5 standard
  // deviations (<= step / 2 / sqrt(kDraws)) of x when the rounding is unbiased.
  const double tolerance = 5 * step / 2 / std::sqrt(static_cast<double>(kDraws));
  for (Eigen::Index i = 0; i < x.size(); ++i) EXPECT_NEAR(sum.data()[i] / kDraws, x.data()[i], tolerance);
}

TEST(Quantize, ThirtyTwoBitsIsTheIdentityBitForBit) {
  const Matrix<float> x = RandomMatrix(9, 7, 3).cast<float>();
  const Matrix<float> q = FakeQuantize(x, 32, Rounding::kStochastic, nullptr);
  ASSERT_EQ(q.size(), x.size());
  EXPECT_EQ(std::memcmp(q.data(), x.data(), sizeof(float) * static_cast<size_t>(x.size())), 0);
}

TEST(Quantize, SixteenBitsIsBfloat16WithinHalfAnUlp) {
  const Matrix<float> x = RandomMatrix(20, 20, 8).cast<float>();
  const Matrix<float> q = FakeQuantize(x, 16, Rounding::kNearest, nullptr);
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &q.data()[i], sizeof u);
    EXPECT_EQ(u & 0xffffu, 0u);  // a bfloat16 value
    int e = 0;
    std::frexp(x.data()[i], &e);
    // 8 significant bits: an ulp is 2^(e - 8), half of it 2^(e - 9).
    EXPECT_LE(std::fabs(q.data()[i] - x.data()[i]), std::ldexp(1.0, e - 9) * (1 + 1e-6));
  }
}

TEST(QuantizedLinear, FullPrecisionIsTheUnquantisedLayerBitForBit) {
  Rng a(1), b(1);
  Linear<float> plain("fc", 6, 5, true, a), q("fc", 6, 5, true, b);
  ASSERT_TRUE(q.SetQuantization(LayerQuant{}).ok());
  const Matrix<float> x = RandomMatrix(4, 6, 2).cast<float>(), dy = RandomMatrix(4, 5, 3).cast<float>();
  LayerCache<float> c1, c2;
  auto y1 = plain.Forward(x, c1), y2 = q.Forward(x, c2);
  ASSERT_TRUE(y1.ok() && y2.ok());
  EXPECT_EQ(std::memcmp(y1->data(), y2->data(), sizeof(float) * static_cast<size_t>(y1->size())), 0);
  auto d1 = plain.Backward(dy, c1), d2 = q.Backward(dy, c2);
  ASSERT_TRUE(d1.ok() && d2.ok());
  EXPECT_EQ(std::memcmp(d1->data(), d2->data(), sizeof(float) * static_cast<size_t>(d1->size())), 0);
  EXPECT_EQ(std::memcmp(plain.weight().grad.data(), q.weight().grad.data(), sizeof(float) * 30), 0);
}

TEST(QuantizedLinear, ForwardAndStraightThroughBackwardFollowTheFormulas) {
  Rng rng(4);
  Linear<double> layer("fc", 6, 5, true, rng);
  layer.bias().value = RandomMatrix(1, 5, 9);
  LayerQuant q;
  q.weight_bits = 4;
  q.activation_bits = 3;
  q.gradient_bits = 5;
  q.gradient_rounding = Rounding::kNearest;
  ASSERT_TRUE(layer.SetQuantization(q).ok());
  const Matrix<double> x = RandomMatrix(7, 6, 5), dy = RandomMatrix(7, 5, 6);
  const Matrix<double> xq = FakeQuantize(x, 3, Rounding::kNearest, nullptr);
  const Matrix<double> wq = FakeQuantize(layer.weight().value, 4, Rounding::kNearest, nullptr);
  const Matrix<double> gq = FakeQuantize(dy, 5, Rounding::kNearest, nullptr);
  LayerCache<double> cache;
  auto y = layer.Forward(x, cache);
  ASSERT_TRUE(y.ok()) << y.status();
  Matrix<double> expect = xq * wq;
  expect.rowwise() += layer.bias().value.row(0);
  EXPECT_LT((*y - expect).cwiseAbs().maxCoeff(), 1e-12);
  auto dx = layer.Backward(dy, cache);
  ASSERT_TRUE(dx.ok()) << dx.status();
  // Straight through: the quantisers pass the gradient unchanged, so dL/dx is the product
  // with the quantised weights and dL/dW the product with the quantised input.
  EXPECT_LT((*dx - gq * wq.transpose()).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((layer.weight().grad - xq.transpose() * gq).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((layer.bias().grad - gq.colwise().sum()).cwiseAbs().maxCoeff(), 1e-12);
  // Quantisation changed the answer (the test would pass vacuously otherwise).
  EXPECT_GT((x * layer.weight().value - xq * wq).cwiseAbs().maxCoeff(), 1e-3);
}

TEST(QuantizedLinear, AnUnsupportedWidthIsRefusedAndNamed) {
  Rng rng(1);
  Linear<float> layer("block0.fc1", 2, 2, false, rng);
  LayerQuant q;
  q.activation_bits = 12;
  absl::Status st = layer.SetQuantization(q);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("block0.fc1.weight: activation width: 12 bits"));
}

}  // namespace
}  // namespace testbed::train
