// The CUDA kernels compute what the CPU code computes. Skipped when the build has no CUDA or
// no GPU is usable.
#include <gtest/gtest.h>

#include <vector>

#include "gradients.h"
#include "sketch_codec.h"
#if defined(TESTBED_S2REDUCER_HAS_CUDA)
#include "s2reducer_cuda.h"
#endif

namespace testbed::s2reducer {
namespace {

void SkipWithoutGpu() {
#if defined(TESTBED_S2REDUCER_HAS_CUDA)
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no usable GPU (cudaGetDeviceCount failed or found none)";
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(S2ReducerCuda, EncodeMatchesCpu) {
  SkipWithoutGpu();
  if (::testing::Test::IsSkipped()) return;
#if defined(TESTBED_S2REDUCER_HAS_CUDA)
  SketchShape shape;
  shape.elements = 1'000'003;  // a partial last bitmap word
  shape.rows = 5;
  shape.columns = 20011;
  shape.seed = 99;
  // Dyadic values: the atomic adds on the GPU are exact in any order.
  const std::vector<float> g = testing::DyadicGradient({shape.elements, 0.03, false}, 12);
  std::vector<std::uint64_t> bitmap_cpu(shape.bitmap_words()), bitmap_gpu(shape.bitmap_words());
  std::vector<float> sketch_cpu(shape.counters()), sketch_gpu(shape.counters());
  const EncodeStats cpu = EncodeSketch(shape, g, bitmap_cpu, sketch_cpu);
  std::int64_t nonzeros = -1, nonfinite = -1;
  const std::string err = EncodeSketchCuda(shape, g.data(), bitmap_gpu.data(), sketch_gpu.data(), &nonzeros, &nonfinite);
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(nonzeros, cpu.nonzeros);
  EXPECT_EQ(nonfinite, 0);
  EXPECT_EQ(bitmap_gpu, bitmap_cpu);
  EXPECT_EQ(sketch_gpu, sketch_cpu);
#endif
}

TEST(S2ReducerCuda, DecodeMatchesCpuBitForBit) {
  SkipWithoutGpu();
  if (::testing::Test::IsSkipped()) return;
#if defined(TESTBED_S2REDUCER_HAS_CUDA)
  SketchShape shape;
  shape.elements = 500'001;
  shape.rows = 4;  // even: the mean of the two middle values
  shape.columns = 3001;
  shape.seed = 5;
  const std::vector<float> g = testing::GaussianGradient(shape.elements, 0.05, 8);
  std::vector<std::uint64_t> bitmap(shape.bitmap_words());
  std::vector<float> sketch(shape.counters());
  (void)EncodeSketch(shape, g, bitmap, sketch);
  std::vector<float> cpu(g.size()), gpu(g.size());
  DecodeSketch(shape, bitmap, sketch, 3, cpu);
  const std::string err = DecodeSketchCuda(shape, bitmap.data(), sketch.data(), 3, gpu.data());
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(gpu, cpu);
#endif
}

}  // namespace
}  // namespace testbed::s2reducer
