// The CUDA selection equals the CPU selection bit for bit (indices, values and residual).
// Skipped when the build has no CUDA or no GPU is usable.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "topk_select.h"
#if defined(TESTBED_TOPK_HAS_CUDA)
#include "topk_cuda.h"
#endif

namespace testbed::topk {
namespace {

TEST(TopKCuda, SelectionAndResidualMatchCpu) {
#if !defined(TESTBED_TOPK_HAS_CUDA)
  GTEST_SKIP() << "built without CUDA";
#else
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no usable GPU (cudaGetDeviceCount failed or found none)";
  const std::int64_t n = 3'000'017;
  std::mt19937_64 rng(4);
  // Coarse values: many ties at the threshold exercise the index-order tie rule.
  std::uniform_int_distribution<int> q(-3000, 3000);
  std::vector<float> g(static_cast<std::size_t>(n)), residual(static_cast<std::size_t>(n));
  for (float& v : g) v = static_cast<float>(q(rng)) / 64.0f;
  for (float& v : residual) v = static_cast<float>(q(rng)) / 1024.0f;
  for (std::int64_t k : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{30000}, n}) {
    std::vector<float> r_cpu = residual, r_gpu = residual;
    std::vector<std::uint32_t> i_cpu(static_cast<std::size_t>(k)), i_gpu(static_cast<std::size_t>(k));
    std::vector<float> v_cpu(static_cast<std::size_t>(k)), v_gpu(static_cast<std::size_t>(k));
    ASSERT_EQ(SelectTopK(g, r_cpu, k, i_cpu, v_cpu), 0);
    std::int64_t nonfinite = -1;
    const std::string err = SelectTopKCuda(g.data(), r_gpu.data(), n, k, i_gpu.data(), v_gpu.data(), &nonfinite);
    ASSERT_TRUE(err.empty()) << err;
    EXPECT_EQ(nonfinite, 0);
    EXPECT_EQ(i_gpu, i_cpu) << "k = " << k;
    EXPECT_EQ(v_gpu, v_cpu) << "k = " << k;
    EXPECT_EQ(r_gpu, r_cpu) << "k = " << k;
  }
#endif
}

}  // namespace
}  // namespace testbed::topk
