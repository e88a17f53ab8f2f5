// Delayed SGD's gradient queue against what the analysis defines: the update of step t applies
// exactly the gradient of step t - tau_t (none while that step lies before the first), with
// tau_t fixed or drawn uniformly on {0..tau} from the seed alone; on a quadratic the weights
// follow the closed-form trajectory of delayed gradient descent; with tau = 0 the queue hands
// back the gradient bit for bit. And the squared loss's value and gradient against a hand
// count and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "testbed/train/delayed_gradients.h"
#include "testbed/train/loss.h"
#include "testbed/train/sgd.h"

namespace testbed::train {
namespace {

TEST(DelayOfStep, FixedIsTauAndRandomIsUniformOnZeroToTauAndFixedBySeed) {
  for (std::int64_t t = 0; t < 100; ++t) EXPECT_EQ(DelayOfStep({8, false, 1}, t), 8);
  EXPECT_EQ(DelayOfStep({0, true, 1}, 5), 0);
  std::map<int, int> counts;
  const int draws = 33000, tau = 10;
  int same_as_other_seed = 0;
  for (std::int64_t t = 0; t < draws; ++t) {
    const int d = DelayOfStep({tau, true, 7}, t);
    ASSERT_GE(d, 0);
    ASSERT_LE(d, tau);
    ++counts[d];
    EXPECT_EQ(d, DelayOfStep({tau, true, 7}, t));  // a pure function of (seed, step)
    if (d == DelayOfStep({tau, true, 8}, t)) ++same_as_other_seed;
  }
  ASSERT_EQ(counts.size(), static_cast<size_t>(tau + 1));
  for (const auto& [d, n] : counts) EXPECT_NEAR(n, draws / (tau + 1), 0.1 * draws / (tau + 1)) << "delay " << d;
  // Another seed draws another sequence: agreeing about 1 time in 11.
  EXPECT_LT(same_as_other_seed, draws / 5);
}

// Two parameters whose gradient at step t is filled with t (and -t): what the queue hands back
// names the step it came from.
struct Tagged {
  Param<double> a{"a", Matrix<double>::Zero(2, 3)}, b{"b", Matrix<double>::Zero(1, 4)};
  std::vector<Param<double>*> params{&a, &b};
  void Fill(std::int64_t t) {
    a.grad.setConstant(static_cast<double>(t));
    b.grad.setConstant(-static_cast<double>(t));
  }
};

TEST(DelayedGradients, TheAppliedGradientIsExactlyThatOfStepTMinusTau) {
  for (const bool random : {false, true}) {
    const DelayOptions options{5, random, 3};
    DelayedGradients<double> queue(options);
    Tagged m;
    int applied = 0;
    for (std::int64_t t = 0; t < 200; ++t) {
      m.Fill(t);
      const std::optional<int> tau = queue.Exchange(m.params);
      const int expected = DelayOfStep(options, t);
      if (t - expected < 0) {
        EXPECT_FALSE(tau.has_value()) << "step " << t;
        EXPECT_TRUE(m.a.grad.isZero() && m.b.grad.isZero()) << "nothing to apply at step " << t;
        continue;
      }
      ASSERT_TRUE(tau.has_value()) << "step " << t;
      EXPECT_EQ(*tau, expected);
      EXPECT_TRUE((m.a.grad.array() == static_cast<double>(t - *tau)).all()) << "step " << t;
      EXPECT_TRUE((m.b.grad.array() == -static_cast<double>(t - *tau)).all()) << "step " << t;
      ++applied;
    }
    EXPECT_EQ(queue.steps(), 200);
    if (!random) {
      EXPECT_EQ(applied, 195);  // steps 0..4 have no gradient 5 steps old
    }
  }
}

TEST(DelayedGradients, WithoutADelayTheGradientComesBackBitForBit) {
  DelayedGradients<float> queue(DelayOptions{0, false, 1});
  Param<float> p{"p", Matrix<float>::Random(3, 3)};
  for (int t = 0; t < 5; ++t) {
    p.grad = Matrix<float>::Random(3, 3);
    const Matrix<float> before = p.grad;
    ASSERT_EQ(queue.Exchange({&p}), std::optional<int>(0));
    EXPECT_TRUE((p.grad.array() == before.array()).all());
  }
}

// f(w) = a w^2 / 2, gradient a w; delayed gradient descent w_{t+1} = w_t - lr a w_{t - tau}.
TEST(DelayedGradients, OnAQuadraticTheWeightsFollowTheClosedFormTrajectory) {
  const double a = 0.8, lr = 0.05, w0 = 2.0;
  const int tau = 6, steps = 200;
  DelayedGradients<double> queue(DelayOptions{tau, false, 1});
  Sgd<double> sgd(SgdOptions{lr, 0.0, 0.0});
  Param<double> w{"w", Matrix<double>::Constant(1, 1, w0)};
  std::vector<double> trajectory = {w0};  // w_0, w_1, ...
  for (int t = 0; t < steps; ++t) {
    w.grad(0, 0) = a * w.value(0, 0);
    if (queue.Exchange({&w})) sgd.Step({&w});
    w.ZeroGrad();
    trajectory.push_back(w.value(0, 0));
  }
  // The first tau steps have nothing to apply; then each of the next tau + 1 updates applies a
  // gradient taken at w0 (the weights had not moved yet): w_{tau + 1 + k} = w0 (1 - (k + 1) lr a).
  for (int t = 0; t <= tau; ++t) EXPECT_EQ(trajectory[static_cast<size_t>(t)], w0);
  for (int k = 0; k <= tau; ++k) {
    EXPECT_NEAR(trajectory[static_cast<size_t>(tau + 1 + k)], w0 * (1 - (k + 1) * lr * a), 1e-12) << k;
  }
  // Beyond, the recursion itself, in the same operations: bit for bit.
  std::vector<double> ref = {w0};
  for (int t = 0; t < steps; ++t) {
    double next = ref.back();
    if (t - tau >= 0) next -= lr * (a * ref[static_cast<size_t>(t - tau)]);
    ref.push_back(next);
  }
  EXPECT_EQ(trajectory, ref);
  // lr a tau = 0.24 is inside delayed gradient descent's region of stability: it converges.
  EXPECT_LT(std::fabs(trajectory.back()), 1e-3 * w0);
}

TEST(SquaredError, ValueAndGradientAgainstAHandCountAndFiniteDifferences) {
  Matrix<double> z(2, 3);
  z << 0.5, -1.0, 2.0, 0.0, 0.25, 1.0;
  const std::vector<std::int64_t> y = {2, 0};
  auto lg = SquaredError<double>(z, y);
  ASSERT_TRUE(lg.ok()) << lg.status();
  // Row 0: (0.25 + 1 + 1) / 2 = 1.125; row 1: (1 + 0.0625 + 1) / 2 = 1.03125; mean over rows.
  EXPECT_DOUBLE_EQ(lg->loss, (1.125 + 1.03125) / 2);
  const double h = 1e-6;
  for (Eigen::Index i = 0; i < z.rows(); ++i) {
    for (Eigen::Index j = 0; j < z.cols(); ++j) {
      Matrix<double> up = z, down = z;
      up(i, j) += h;
      down(i, j) -= h;
      const double numeric = (SquaredError<double>(up, y)->loss - SquaredError<double>(down, y)->loss) / (2 * h);
      EXPECT_NEAR(lg->dlogits(i, j), numeric, 1e-8);
    }
  }
  auto same = ClassificationLoss<double>(LossKind::kSquared, z, y);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->loss, lg->loss);
  EXPECT_FALSE(SquaredError<double>(z, {2, 3}).ok());  // label outside the classes
  EXPECT_FALSE(SquaredError<double>(z, {1}).ok());     // labels and rows differ
  EXPECT_FALSE(LossKindFromName("hinge").ok());
}

}  // namespace
}  // namespace testbed::train
