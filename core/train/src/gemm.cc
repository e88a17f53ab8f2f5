#include "testbed/train/gemm.h"

#include "absl/strings/str_cat.h"

namespace testbed::train {
namespace {

thread_local GemmBackend* thread_backend = nullptr;

}  // namespace

absl::Status EigenGemm::Gemm(const Matrix<float>& a, bool transpose_a, const Matrix<float>& b, bool transpose_b,
                             float beta, Matrix<float>& c) {
  const Eigen::Index m = transpose_a ? a.cols() : a.rows();
  const Eigen::Index k = transpose_a ? a.rows() : a.cols();
  const Eigen::Index kb = transpose_b ? b.cols() : b.rows();
  const Eigen::Index n = transpose_b ? b.rows() : b.cols();
  if (k != kb) {
    return absl::InvalidArgumentError(absl::StrCat("gemm: inner dimensions ", k, " and ", kb, " differ"));
  }
  if (beta != 0.0f && (c.rows() != m || c.cols() != n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm: accumulating into ", c.rows(), "x", c.cols(), " but the product is ", m, "x", n));
  }
  // The same Eigen expressions the layers wrote inline, so results are unchanged bit for bit.
  auto product = [&](auto&& lhs, auto&& rhs) {
    if (beta == 0.0f) {
      c.resize(m, n);
      c.noalias() = lhs * rhs;
    } else if (beta == 1.0f) {
      c.noalias() += lhs * rhs;
    } else {
      c *= beta;
      c.noalias() += lhs * rhs;
    }
  };
  if (transpose_a && transpose_b) product(a.transpose(), b.transpose());
  else if (transpose_a) product(a.transpose(), b);
  else if (transpose_b) product(a, b.transpose());
  else product(a, b);
  return absl::OkStatus();
}

GemmBackend& ThreadGemm() noexcept {
  static EigenGemm eigen;
  return thread_backend != nullptr ? *thread_backend : eigen;
}

ScopedGemm::ScopedGemm(GemmBackend& backend) noexcept : previous_(thread_backend) { thread_backend = &backend; }

ScopedGemm::~ScopedGemm() { thread_backend = previous_; }

}  // namespace testbed::train
