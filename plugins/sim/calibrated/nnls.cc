#include "nnls.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace testbed::calibrated {
namespace {

// Unconstrained least squares on the columns in `passive`; the others stay zero.
Eigen::VectorXd SolveOnSubset(const Eigen::MatrixXd& a, const Eigen::VectorXd& b, const std::vector<bool>& passive) {
  std::vector<Eigen::Index> cols;
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    if (passive[static_cast<std::size_t>(j)]) cols.push_back(j);
  }
  Eigen::VectorXd z = Eigen::VectorXd::Zero(a.cols());
  if (cols.empty()) return z;
  Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
  for (std::size_t i = 0; i < cols.size(); ++i) sub.col(static_cast<Eigen::Index>(i)) = a.col(cols[i]);
  // Column-pivoting QR copes with nearly dependent columns (two features that move together
  // over the measured rows) without blowing up.
  const Eigen::VectorXd zs = sub.colPivHouseholderQr().solve(b);
  for (std::size_t i = 0; i < cols.size(); ++i) z[cols[i]] = zs[static_cast<Eigen::Index>(i)];
  return z;
}

}  // namespace

absl::StatusOr<Eigen::VectorXd> SolveNnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& b) {
  if (a.rows() != b.size()) {
    return absl::InvalidArgumentError(absl::StrCat("nnls: ", a.rows(), " rows but ", b.size(), " targets"));
  }
  if (!a.allFinite() || !b.allFinite()) return absl::InvalidArgumentError("nnls: non-finite input");
  const Eigen::Index n = a.cols();
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  std::vector<bool> passive(static_cast<std::size_t>(n), false);
  const double scale = std::max(1.0, a.cwiseAbs().maxCoeff() * std::max(1.0, b.cwiseAbs().maxCoeff()));
  const double tol = 10.0 * std::numeric_limits<double>::epsilon() * scale * static_cast<double>(std::max<Eigen::Index>(n, a.rows()));
  const int max_outer = 30 * static_cast<int>(n) + 30;

  for (int outer = 0; outer < max_outer; ++outer) {
    // Gradient of -1/2 ||Ax - b||^2: positive entries are directions that still reduce the
    // residual.
    const Eigen::VectorXd w = a.transpose() * (b - a * x);
    Eigen::Index best = -1;
    double best_w = tol;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (!passive[static_cast<std::size_t>(j)] && w[j] > best_w) {
        best_w = w[j];
        best = j;
      }
    }
    if (best < 0) return x;  // Kuhn-Tucker conditions hold
    passive[static_cast<std::size_t>(best)] = true;

    // Inner loop: move towards the unconstrained solution on the passive set, stopping at
    // the first coefficient that would turn negative, and drop it.
    for (int inner = 0; inner <= 3 * static_cast<int>(n) + 3; ++inner) {
      const Eigen::VectorXd z = SolveOnSubset(a, b, passive);
      bool feasible = true;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[static_cast<std::size_t>(j)] && z[j] <= 0) feasible = false;
      }
      if (feasible) {
        x = z;
        break;
      }
      double alpha = 1.0;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[static_cast<std::size_t>(j)] && z[j] <= 0) alpha = std::min(alpha, x[j] / (x[j] - z[j]));
      }
      x += alpha * (z - x);
      for (Eigen::Index j = 0; j < n; ++j) {
        if (passive[static_cast<std::size_t>(j)] && x[j] <= tol) {
          passive[static_cast<std::size_t>(j)] = false;
          x[j] = 0;
        }
      }
    }
  }
  return absl::InternalError(absl::StrCat("nnls: no convergence after ", max_outer, " steps"));
}

}  // namespace testbed::calibrated
