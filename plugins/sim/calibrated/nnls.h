// Non-negative least squares: the fitting step of the calibrated device model. Every
// coefficient of that model is an inverse efficiency or a fixed time, so a negative value
// would be unphysical; NNLS keeps them at zero instead of letting them cancel each other.
#pragma once

#include <Eigen/Dense>

#include "absl/status/statusor.h"

namespace testbed::calibrated {

// Solves min ||A x - b||_2 subject to x >= 0 by the active-set method of Lawson and Hanson
// ("Solving Least Squares Problems", 1974, ch. 23). Errors: InvalidArgument when the shapes
// disagree or an entry is not finite, Internal when the iteration limit is hit.
[[nodiscard]] absl::StatusOr<Eigen::VectorXd> SolveNnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& b);

}  // namespace testbed::calibrated
