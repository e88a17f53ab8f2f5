// The CUDA twins against the CPU kernels on the same random inputs (float, tolerance for
// the different evaluation order and fast math). Skipped with a message without a GPU.
#include <gtest/gtest.h>

#include "testbed/train/cuda_kernels.h"
#include "testbed/train/gelu.h"
#include "testbed/train/layer_norm.h"
#include "testbed/train/rng.h"
#include "testbed/train/softmax.h"

namespace testbed::train {
namespace {

Matrix<float> Random(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, double scale) {
  Rng rng(seed);
  Matrix<float> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.Normal() * scale);
  return m;
}

void ExpectNear(const Matrix<float>& gpu, const Matrix<float>& cpu, float tol, const char* what) {
  EXPECT_LE((gpu - cpu).cwiseAbs().maxCoeff(), tol * (1 + cpu.cwiseAbs().maxCoeff())) << what;
}

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::Available()) GTEST_SKIP() << "no usable GPU (or built without CUDA): CUDA twins not tested";
  }
};

TEST_F(CudaKernels, GeluForwardAndBackwardMatchTheCpu) {
  const Matrix<float> x = Random(37, 129, 1, 3.0);
  const Matrix<float> dy = Random(37, 129, 2, 1.0);
  Gelu<float> gelu;
  LayerCache<float> cache;
  const Matrix<float> y = *gelu.Forward(x, cache);
  const Matrix<float> dx = *gelu.Backward(dy, cache);
  Matrix<float> gy(x.rows(), x.cols()), gdx(x.rows(), x.cols());
  ASSERT_TRUE(cuda::GeluForward(x.data(), gy.data(), x.size()).ok());
  ASSERT_TRUE(cuda::GeluBackward(x.data(), dy.data(), gdx.data(), x.size()).ok());
  ExpectNear(gy, y, 1e-5f, "gelu forward");
  ExpectNear(gdx, dx, 1e-5f, "gelu backward");
}

TEST_F(CudaKernels, LayerNormMatchesTheCpu) {
  const Matrix<float> x = Random(19, 300, 3, 2.0);  // wider than a block of threads
  LayerNorm<float> ln("ln", 300);
  ln.Params()[0]->value = Random(1, 300, 4, 1.0);
  ln.Params()[1]->value = Random(1, 300, 5, 1.0);
  LayerCache<float> cache;
  const Matrix<float> y = *ln.Forward(x, cache);
  Matrix<float> gy(x.rows(), x.cols());
  ASSERT_TRUE(cuda::LayerNormForward(x.data(), ln.Params()[0]->value.data(), ln.Params()[1]->value.data(), gy.data(),
                                     x.rows(), x.cols(), static_cast<float>(ln.eps()))
                  .ok());
  ExpectNear(gy, y, 1e-4f, "layer norm");
}

TEST_F(CudaKernels, SoftmaxMatchesTheCpu) {
  const Matrix<float> x = Random(23, 517, 6, 4.0);
  Matrix<float> gy(x.rows(), x.cols());
  ASSERT_TRUE(cuda::SoftmaxRows(x.data(), gy.data(), x.rows(), x.cols()).ok());
  ExpectNear(gy, SoftmaxRows(x), 1e-5f, "softmax");
}

TEST(CudaKernelsWithoutGpu, ReportUnavailableInsteadOfCrashing) {
  if (cuda::Available()) GTEST_SKIP() << "a GPU is present";
  float x = 1, y = 0;
  EXPECT_EQ(cuda::GeluForward(&x, &y, 1).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace testbed::train
