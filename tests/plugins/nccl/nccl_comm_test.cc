// The nccl communicator: one rank per GPU, each driven from its own thread, buffers in GPU
// memory (or host memory with host_buffers). Without a GPU (or driver) every test skips with a message, except the check that
// Connect then reports Unavailable instead of crashing.
#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "comm_loader.h"
#include "conformance.h"

namespace testbed::testing {
namespace {

// NCCL's point-to-point rules: no self-sends, pairing by posting order only, equal counts, and
// one operation at a time per group with sends waiting for their receives.
constexpr P2pFeatures kNcclRules{
    .sends_to_self = false, .reorders_by_tag = false, .larger_receive = false, .sends_wait_for_receives = true};

using ::testing::HasSubstr;

class CudaSpace final : public BufferSpace {
 public:
  [[nodiscard]] void* Allocate(std::size_t bytes) override {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes == 0 ? 1 : bytes), cudaSuccess);
    return p;
  }
  void Free(void* p) override { cudaFree(p); }
  void Upload(void* dst, const void* src, std::size_t bytes) override {
    EXPECT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    // From pageable memory cudaMemcpy may return before the data lands, and the collectives
    // run on a non-blocking stream that does not wait for the default one.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  void Download(void* dst, const void* src, std::size_t bytes) override {
    EXPECT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
};

int GpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void OnEveryRank(std::vector<std::unique_ptr<CommGroup>>& ranks, const std::function<void(CommGroup&)>& fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(static_cast<int>(r));
      fn(*ranks[r]);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(NcclComm, EveryOperationMatchesTheSerialReference) {
  const int gpus = GpuCount();
  if (gpus == 0) GTEST_SKIP() << "no usable GPU: nccl communicator not tested";
  auto loaded = LoadCommunicator(TESTBED_NCCL_PLUGIN, "nccl", {{"timeout_s", 60.0}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto ranks = (*loaded)->comm->Connect(std::min(gpus, 4));
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  OnEveryRank(*ranks, [](CommGroup& g) {
    CudaSpace space;
    CheckEverything(g, space, kNcclRules);
  });
}

// host_buffers = true: the same checks with host buffers, staged through each rank's GPU
// (what the executor uses).
TEST(NcclComm, HostBuffersMatchTheSerialReference) {
  const int gpus = GpuCount();
  if (gpus == 0) GTEST_SKIP() << "no usable GPU: nccl communicator with host buffers not tested";
  auto loaded = LoadCommunicator(TESTBED_NCCL_PLUGIN, "nccl", {{"timeout_s", 60.0}, {"host_buffers", true}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->comm->memory_space(), MemorySpace::kHost);
  auto ranks = (*loaded)->comm->Connect(std::min(gpus, 4));
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  OnEveryRank(*ranks, [](CommGroup& g) {
    EXPECT_EQ(g.memory_space(), MemorySpace::kHost);
    HostSpace space;
    CheckEverything(g, space, kNcclRules);
  });
}

TEST(NcclComm, RankThatNeverJoinsIsNamedWithinTheTimeout) {
  const int gpus = GpuCount();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  auto loaded = LoadCommunicator(TESTBED_NCCL_PLUGIN, "nccl", {{"timeout_s", 1.0}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto ranks = (*loaded)->comm->Connect(2);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  cudaSetDevice(0);
  CommGroup& g = *(*ranks)[0];
  CudaSpace space;
  SpaceBuffer<float> buf(space, std::vector<float>(16, 1.0f));
  absl::Status s = g.AllReduce(buf.data(), buf.data(), 16, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("all_reduce"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("1 (world rank 1)"));
  EXPECT_EQ(g.Barrier().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(NcclComm, WithoutAGpuConnectIsUnavailable) {
  if (GpuCount() > 0) GTEST_SKIP() << "a GPU is present";
  auto loaded = LoadCommunicator(TESTBED_NCCL_PLUGIN, "nccl", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto ranks = (*loaded)->comm->Connect(1);
  EXPECT_EQ(ranks.status().code(), absl::StatusCode::kUnavailable) << ranks.status();
}

}  // namespace
}  // namespace testbed::testing
