// The CUDA encoder and decoder produce the CPU's payloads and values bit for bit. Skipped when
// the build has no CUDA or no GPU is usable.
#include <gtest/gtest.h>

#include <vector>

#include "casq_test_data.h"
#include "element_rules.h"
#include "quantizer.h"
#if defined(TESTBED_CASQ_HAS_CUDA)
#include "casq_cuda.h"
#endif

namespace testbed::casq {
namespace {

TEST(CasqCuda, EncodeAndDecodeMatchCpu) {
#if !defined(TESTBED_CASQ_HAS_CUDA)
  GTEST_SKIP() << "built without CUDA";
#else
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no usable GPU (cudaGetDeviceCount failed or found none)";
  const std::int64_t n = 2'000'003;
  std::vector<EncodedRank> cpu_ranks;
  for (double density : {1.0, 0.03}) {
    for (int bits : {2, 3}) {
      const std::vector<float> g = testing::HeavyTailed(n, density, 40 + static_cast<std::uint64_t>(bits));
      EncodeSettings s;
      s.bits = bits;
      s.clusters = 3;
      s.stream = StreamKey(5, 1, 2);
      const EncodedRank cpu = EncodeRank(g, s);
      EncodedRank gpu;
      const std::string err = EncodeRankCuda(g.data(), n, s, &gpu);
      ASSERT_TRUE(err.empty()) << err;
      EXPECT_EQ(gpu.nonfinite, 0);
      EXPECT_EQ(gpu.positions, cpu.positions);
      EXPECT_EQ(gpu.count, cpu.count);
      EXPECT_EQ(gpu.levels, cpu.levels);
      EXPECT_EQ(gpu.bitmap, cpu.bitmap);
      EXPECT_EQ(gpu.codes, cpu.codes) << "density " << density << " bits " << bits;
      if (bits == 2) cpu_ranks.push_back(cpu);
    }
  }
  std::vector<RankView> views;
  std::vector<RankPointers> pointers;
  for (const EncodedRank& e : cpu_ranks) {
    views.push_back({e.positions, e.count, e.levels, e.bitmap, e.codes});
    pointers.push_back({e.positions, e.count, e.levels.data(), e.bitmap.data(), static_cast<std::int64_t>(e.bitmap.size()),
                        e.codes.data(), static_cast<std::int64_t>(e.codes.size())});
  }
  std::vector<float> cpu(static_cast<std::size_t>(n)), gpu(static_cast<std::size_t>(n));
  DecodeRanks(views, 2, 2, cpu);
  const std::string err = DecodeRanksCuda(pointers.data(), static_cast<int>(pointers.size()), n, 2, 2, gpu.data());
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(gpu, cpu);
#endif
}

}  // namespace
}  // namespace testbed::casq
