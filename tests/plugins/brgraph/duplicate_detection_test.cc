// BRGraph's duplicate detection: on random batches over random resident sets, the
// duplicates are exactly the set intersection and the fresh vertices the set difference
// (std::set_intersection / std::set_difference of the sorted ids), each in the batch's
// order, for 1 to 8 threads and batches large enough to be cut into slices; a new resident
// set replaces the old one; ids outside the graph are refused by position. The CUDA twin
// equals the CPU (skipped without CUDA or a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "duplicate_detection.h"
#if defined(TESTBED_BRGRAPH_HAS_CUDA)
#include "duplicate_detection_cuda.h"
#endif

namespace testbed::brgraph {
namespace {

// `n` distinct ids of [0, vertices), in random order.
std::vector<std::int64_t> Distinct(std::int64_t vertices, size_t n, std::mt19937_64& rng) {
  std::vector<std::int64_t> all(static_cast<size_t>(vertices));
  for (std::int64_t v = 0; v < vertices; ++v) all[static_cast<size_t>(v)] = v;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n);
  return all;
}

// The ids of `batch` that are (or are not) in `resident`, in batch order, by sorted sets.
std::vector<std::int64_t> Reference(const std::vector<std::int64_t>& batch, std::vector<std::int64_t> resident,
                                    bool in) {
  std::sort(resident.begin(), resident.end());
  std::vector<std::int64_t> sorted = batch, picked;
  std::sort(sorted.begin(), sorted.end());
  if (in) {
    std::set_intersection(sorted.begin(), sorted.end(), resident.begin(), resident.end(), std::back_inserter(picked));
  } else {
    std::set_difference(sorted.begin(), sorted.end(), resident.begin(), resident.end(), std::back_inserter(picked));
  }
  std::vector<std::int64_t> out;
  for (std::int64_t v : batch) {
    if (std::binary_search(picked.begin(), picked.end(), v)) out.push_back(v);
  }
  return out;
}

TEST(DuplicateDetection, EqualsTheSetIntersectionInBatchOrder) {
  std::mt19937_64 rng(11);
  constexpr std::int64_t kVertices = 200000;
  for (int threads : {1, 2, 3, 8}) {
    DuplicateDetector d(kVertices, threads);
    for (size_t trial = 0; trial < 6; ++trial) {
      // Small and large batches (the large ones cut into slices), overlapping heavily or not.
      const size_t n = trial % 2 == 0 ? 37 : 60000;
      const std::vector<std::int64_t> resident = Distinct(kVertices, trial < 3 ? 50000 : 150000, rng);
      const std::vector<std::int64_t> batch = Distinct(kVertices, n, rng);
      ASSERT_TRUE(d.SetResident(resident).ok());
      Detection out;
      ASSERT_TRUE(d.Detect(batch, out).ok());
      EXPECT_EQ(out.duplicates, Reference(batch, resident, true)) << threads << " threads, trial " << trial;
      EXPECT_EQ(out.fresh, Reference(batch, resident, false)) << threads << " threads, trial " << trial;
      EXPECT_EQ(out.duplicates.size() + out.fresh.size(), n);
    }
  }
}

TEST(DuplicateDetection, ConsecutiveBatchesReuseThePreviousOne) {
  // The loader's use: each batch becomes the resident set for the next.
  DuplicateDetector d(10, 2);
  ASSERT_TRUE(d.SetResident(std::vector<std::int64_t>{1, 2, 3}).ok());
  Detection out;
  ASSERT_TRUE(d.Detect(std::vector<std::int64_t>{3, 4, 1, 5}, out).ok());
  EXPECT_EQ(out.duplicates, (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(out.fresh, (std::vector<std::int64_t>{4, 5}));
  ASSERT_TRUE(d.SetResident(std::vector<std::int64_t>{3, 4, 1, 5}).ok());
  ASSERT_TRUE(d.Detect(std::vector<std::int64_t>{2, 5, 9}, out).ok());
  EXPECT_EQ(out.duplicates, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(out.fresh, (std::vector<std::int64_t>{2, 9}));  // 2 was resident two batches ago only
  ASSERT_TRUE(d.SetResident({}).ok());
  ASSERT_TRUE(d.Detect(std::vector<std::int64_t>{2, 5}, out).ok());
  EXPECT_TRUE(out.duplicates.empty());
}

TEST(DuplicateDetection, IdsOutsideTheGraphAreRefusedByPosition) {
  DuplicateDetector d(10, 1);
  const absl::Status bad = d.SetResident(std::vector<std::int64_t>{1, 10});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("resident vertex 10 (position 1)"), std::string::npos) << bad;
  // The refused set left nothing resident.
  Detection out;
  ASSERT_TRUE(d.Detect(std::vector<std::int64_t>{1}, out).ok());
  EXPECT_TRUE(out.duplicates.empty());
  const absl::Status neg = d.Detect(std::vector<std::int64_t>{0, -1}, out);
  EXPECT_NE(neg.message().find("batch vertex -1 (position 1)"), std::string::npos) << neg;
}

TEST(DuplicateDetectionCuda, EqualsTheCpu) {
#if !defined(TESTBED_BRGRAPH_HAS_CUDA)
  GTEST_SKIP() << "built without CUDA";
#else
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no usable GPU (cudaGetDeviceCount failed or found none)";
  std::mt19937_64 rng(12);
  constexpr std::int64_t kVertices = 1 << 20;
  DuplicateDetector cpu(kVertices, 2);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{300000}}) {
    const std::vector<std::int64_t> resident = Distinct(kVertices, 200000, rng);
    const std::vector<std::int64_t> batch = Distinct(kVertices, n, rng);
    ASSERT_TRUE(cpu.SetResident(resident).ok());
    Detection want;
    ASSERT_TRUE(cpu.Detect(batch, want).ok());
    std::vector<std::int64_t> duplicates, fresh;
    const std::string err = DetectDuplicatesCuda(kVertices, resident, batch, duplicates, fresh);
    ASSERT_TRUE(err.empty()) << err;
    EXPECT_EQ(duplicates, want.duplicates) << n;
    EXPECT_EQ(fresh, want.fresh) << n;
  }
#endif
}

}  // namespace
}  // namespace testbed::brgraph
