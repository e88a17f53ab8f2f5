// The matrix-product backends against a plain triple loop in double precision: every
// transposition, overwrite and accumulate, shapes that do not chain. Eigen always; cuBLAS when
// a GPU answers (skipped with a message otherwise). And a Linear layer uses the thread's
// backend.
#include "testbed/train/gemm.h"

#include <memory>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "testbed/train/linear.h"

namespace testbed::train {
namespace {

Matrix<float> Random(Eigen::Index rows, Eigen::Index cols, std::mt19937& gen) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  Matrix<float> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(gen);
  return m;
}

// op(a) op(b) + beta c, summed in double.
Matrix<double> Reference(const Matrix<float>& a, bool ta, const Matrix<float>& b, bool tb, float beta,
                         const Matrix<float>& c) {
  const Matrix<double> A = ta ? Matrix<double>(a.cast<double>().transpose()) : a.cast<double>();
  const Matrix<double> B = tb ? Matrix<double>(b.cast<double>().transpose()) : b.cast<double>();
  Matrix<double> out(A.rows(), B.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    for (Eigen::Index j = 0; j < B.cols(); ++j) {
      double sum = beta != 0.0f ? static_cast<double>(beta) * c(i, j) : 0.0;
      for (Eigen::Index k = 0; k < A.cols(); ++k) sum += A(i, k) * B(k, j);
      out(i, j) = sum;
    }
  }
  return out;
}

void CheckBackend(GemmBackend& gemm) {
  std::mt19937 gen(7);
  // Shapes that are neither square nor multiples of anything.
  const Eigen::Index m = 13, k = 29, n = 7;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f, 0.5f}) {
        const Matrix<float> a = ta ? Random(k, m, gen) : Random(m, k, gen);
        const Matrix<float> b = tb ? Random(n, k, gen) : Random(k, n, gen);
        Matrix<float> c = Random(m, n, gen);
        const Matrix<double> want = Reference(a, ta, b, tb, beta, c);
        if (beta == 0.0f) c.resize(1, 1);  // overwritten: any shape goes
        ASSERT_TRUE(gemm.Gemm(a, ta, b, tb, beta, c).ok()) << gemm.name();
        ASSERT_EQ(c.rows(), m);
        ASSERT_EQ(c.cols(), n);
        const double err = (c.cast<double>() - want).cwiseAbs().maxCoeff();
        EXPECT_LT(err, 1e-4) << gemm.name() << " ta=" << ta << " tb=" << tb << " beta=" << beta;
      }
    }
  }
  Matrix<float> c;
  absl::Status s = gemm.Gemm(Random(3, 4, gen), false, Random(5, 2, gen), false, 0.0f, c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  Matrix<float> small(2, 2);
  s = gemm.Gemm(Random(3, 4, gen), false, Random(4, 2, gen), false, 1.0f, small);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(Gemm, EigenMatchesTheReference) {
  EigenGemm eigen;
  CheckBackend(eigen);
}

TEST(Gemm, CublasMatchesTheReference) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no usable GPU: cuBLAS products not tested";
  auto gemm = MakeCublasGemm(0);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  CheckBackend(**gemm);
}

TEST(Gemm, CublasWithoutAGpuIsUnavailable) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is present";
  const absl::Status st = MakeCublasGemm(0).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
#if defined(TESTBED_TRAIN_HAS_CUDA)
  // The cuBLAS module was found and opened (it is loaded only now, not with the library),
  // and it is the one that found no GPU.
  EXPECT_NE(st.message().find("no GPU 0 (this process sees 0)"), std::string::npos) << st;
#else
  EXPECT_NE(st.message().find("built without CUDA"), std::string::npos) << st;
#endif
}

// Counts products, computing them with Eigen.
class CountingGemm final : public GemmBackend {
 public:
  absl::Status Gemm(const Matrix<float>& a, bool ta, const Matrix<float>& b, bool tb, float beta,
                    Matrix<float>& c) override {
    ++calls;
    return eigen.Gemm(a, ta, b, tb, beta, c);
  }
  std::string name() const override { return "counting"; }
  int calls = 0;
  EigenGemm eigen;
};

TEST(Gemm, LinearLayersUseTheThreadsBackendAndGiveTheSameResult) {
  Rng rng(3);
  Linear<float> plain("fc", 6, 5, true, rng);
  Linear<float> counted = plain;
  std::mt19937 gen(1);
  const Matrix<float> x = Random(4, 6, gen);
  const Matrix<float> dy = Random(4, 5, gen);
  LayerCache<float> c1, c2;
  auto y1 = plain.Forward(x, c1);
  auto dx1 = plain.Backward(dy, c1);
  CountingGemm counting;
  {
    ScopedGemm scope(counting);
    EXPECT_EQ(&ThreadGemm(), &counting);
    auto y2 = counted.Forward(x, c2);
    auto dx2 = counted.Backward(dy, c2);
    ASSERT_TRUE(y1.ok() && y2.ok() && dx1.ok() && dx2.ok());
    // The same Eigen products either way: bitwise equal.
    EXPECT_EQ(*y1, *y2);
    EXPECT_EQ(*dx1, *dx2);
    EXPECT_EQ(plain.weight().grad, counted.weight().grad);
  }
  EXPECT_EQ(counting.calls, 3);  // y = xW, dW += x^T dy, dx = dy W^T
  EXPECT_NE(&ThreadGemm(), &counting);  // the scope restored the default
}

}  // namespace
}  // namespace testbed::train
