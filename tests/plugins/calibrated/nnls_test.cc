// The NNLS solver against the exact optimum found by brute force: the NNLS solution is the
// unconstrained least-squares solution on its own support, so trying every support and
// keeping the best feasible one gives the reference.
#include <random>

#include <gtest/gtest.h>

#include "nnls.h"

namespace testbed::calibrated {
namespace {

Eigen::VectorXd BruteForceNnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& b) {
  const int n = static_cast<int>(a.cols());
  Eigen::VectorXd best = Eigen::VectorXd::Zero(n);
  double best_residual = b.squaredNorm();
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<int> cols;
    for (int j = 0; j < n; ++j) {
      if (mask & (1 << j)) cols.push_back(j);
    }
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
    for (std::size_t i = 0; i < cols.size(); ++i) sub.col(static_cast<Eigen::Index>(i)) = a.col(cols[i]);
    const Eigen::VectorXd z = sub.colPivHouseholderQr().solve(b);
    if ((z.array() < 0).any()) continue;
    Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
    for (std::size_t i = 0; i < cols.size(); ++i) x[cols[i]] = z[static_cast<Eigen::Index>(i)];
    const double r = (a * x - b).squaredNorm();
    if (r < best_residual) {
      best_residual = r;
      best = x;
    }
  }
  return best;
}

TEST(Nnls, MatchesBruteForceOnRandomProblems) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  int constrained = 0;  // problems whose unconstrained solution has a negative entry
  for (int trial = 0; trial < 200; ++trial) {
    const int rows = 6 + trial % 10, cols = 1 + trial % 5;
    Eigen::MatrixXd a(rows, cols);
    Eigen::VectorXd b(rows);
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < cols; ++j) a(i, j) = normal(rng);
      b[i] = normal(rng);
    }
    auto x = SolveNnls(a, b);
    ASSERT_TRUE(x.ok()) << x.status();
    const Eigen::VectorXd ref = BruteForceNnls(a, b);
    EXPECT_TRUE(((*x).array() >= 0).all());
    EXPECT_NEAR((a * *x - b).squaredNorm(), (a * ref - b).squaredNorm(), 1e-9) << "trial " << trial;
    EXPECT_LT((*x - ref).norm(), 1e-6) << "trial " << trial;
    if ((a.colPivHouseholderQr().solve(b).array() < 0).any()) ++constrained;
  }
  EXPECT_GT(constrained, 50);  // the constraint was active often enough to matter
}

TEST(Nnls, RecoversAnExactNonNegativeSolution) {
  Eigen::MatrixXd a(4, 2);
  a << 1, 0, 0, 1, 1, 1, 2, 1;
  const Eigen::Vector2d truth(0.5, 2.0);
  auto x = SolveNnls(a, a * truth);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_NEAR((*x)[0], 0.5, 1e-12);
  EXPECT_NEAR((*x)[1], 2.0, 1e-12);
}

TEST(Nnls, RejectsBadInput) {
  Eigen::MatrixXd a = Eigen::MatrixXd::Ones(3, 2);
  EXPECT_EQ(SolveNnls(a, Eigen::VectorXd::Ones(2)).status().code(), absl::StatusCode::kInvalidArgument);
  a(1, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(SolveNnls(a, Eigen::VectorXd::Ones(3)).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testbed::calibrated
