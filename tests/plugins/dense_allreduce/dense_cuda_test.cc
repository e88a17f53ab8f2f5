// The CUDA copy-and-check and division equal the CPU's. Skipped without CUDA or a GPU.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "dense_codec.h"
#if defined(TESTBED_DENSE_HAS_CUDA)
#include "dense_cuda.h"
#endif

namespace testbed::dense {
namespace {

TEST(DenseCuda, MatchesCpu) {
#if !defined(TESTBED_DENSE_HAS_CUDA)
  GTEST_SKIP() << "built without CUDA";
#else
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no usable GPU (cudaGetDeviceCount failed or found none)";
  std::mt19937_64 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> g(1'000'003);
  for (float& v : g) v = d(rng);
  std::vector<float> cpu(g.size()), gpu(g.size());
  std::int64_t bad = -1;
  ASSERT_EQ(CopyChecked(g, cpu), 0);
  ASSERT_TRUE(CopyCheckedCuda(g.data(), static_cast<std::int64_t>(g.size()), gpu.data(), &bad).empty());
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(gpu, cpu);
  Divide(g, 7, cpu);
  ASSERT_TRUE(DivideCuda(g.data(), static_cast<std::int64_t>(g.size()), 7, gpu.data()).empty());
  EXPECT_EQ(gpu, cpu);
  g[10] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(CopyCheckedCuda(g.data(), static_cast<std::int64_t>(g.size()), gpu.data(), &bad).empty());
  EXPECT_EQ(bad, 1);
#endif
}

}  // namespace
}  // namespace testbed::dense
