// MakeHostStaged: a communicator whose buffers live in "device" memory, used with host
// buffers. The device is a fake (fake_device.h) under the local communicator that fails any
// operation reaching it with a host pointer. The same conformance checks as every
// communicator's must pass through the staging.
#include "testbed/host_staging.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "comm_loader.h"
#include "conformance.h"
#include "on_every_rank.h"
#include "fake_device.h"

namespace testbed::testing {
namespace {

using ::testing::HasSubstr;

struct StagedWorld {
  std::unique_ptr<LoadedCommunicator> loaded;
  std::vector<std::shared_ptr<FakeDeviceMemory>> memories;  // one per rank
  std::vector<std::unique_ptr<CommGroup>> ranks;
};

StagedWorld Connect(int n, double timeout_s) {
  StagedWorld w;
  ConnectedWorld local = ConnectThreadRanks(TESTBED_LOCAL_PLUGIN, "local", n, {{"timeout_s", timeout_s}});
  w.loaded = std::move(local.loaded);
  for (auto& r : local.ranks) {
    auto memory = std::make_shared<FakeDeviceMemory>();
    w.memories.push_back(memory);
    w.ranks.push_back(MakeHostStaged(std::make_unique<DeviceOnlyGroup>(std::move(r), memory), memory));
  }
  return w;
}

class HostStagingConformance : public ::testing::TestWithParam<int> {};

TEST_P(HostStagingConformance, EveryOperationMatchesTheSerialReference) {
  StagedWorld w = Connect(GetParam(), 20.0);
  ASSERT_EQ(static_cast<int>(w.ranks.size()), GetParam());
  for (const auto& r : w.ranks) EXPECT_EQ(r->memory_space(), MemorySpace::kHost);
  OnEveryRank(w.ranks, [](CommGroup& g) {
    HostSpace host;
    CheckEverything(g, host);
  });
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, HostStagingConformance, ::testing::Values(1, 3, 4));

TEST(HostStaging, ResultReachesTheHostBufferOnlyWhenWaitedFor) {
  StagedWorld w = Connect(2, 20.0);
  ASSERT_EQ(w.ranks.size(), 2u);
  std::vector<std::vector<float>> out(2, std::vector<float>(5, -1.0f));
  OnEveryRank(w.ranks, [&out](CommGroup& g) {
    const std::vector<float> in(5, static_cast<float>(g.rank() + 1));
    std::vector<float>& mine = out[static_cast<size_t>(g.rank())];
    auto req = g.IAllReduce(in.data(), mine.data(), 5, DataType::kFloat32, ReduceOp::kSum);
    ASSERT_TRUE(req.ok()) << req.status();
    // The wrapped all-reduce may already be done; the host buffer is still untouched.
    EXPECT_EQ(mine, std::vector<float>(5, -1.0f));
    ASSERT_TRUE((*req)->Wait().ok());
    EXPECT_EQ(mine, std::vector<float>(5, 3.0f));
  });
}

TEST(HostStaging, ReceiveShorterMessageKeepsTheRestOfTheBuffer) {
  StagedWorld w = Connect(2, 20.0);
  ASSERT_EQ(w.ranks.size(), 2u);
  OnEveryRank(w.ranks, [](CommGroup& g) {
    if (g.rank() == 0) {
      const std::vector<std::int32_t> msg{7, 8};
      EXPECT_TRUE(g.Send(msg.data(), 2, DataType::kInt32, 1, 0).ok());
    } else {
      std::vector<std::int32_t> buf{1, 2, 3, 4};
      EXPECT_TRUE(g.Recv(buf.data(), 4, DataType::kInt32, 0, 0).ok());
      EXPECT_EQ(buf, (std::vector<std::int32_t>{7, 8, 3, 4}));
    }
  });
}

TEST(HostStaging, DeviceBlocksAreReusedAndReleasedAtTheEnd) {
  StagedWorld w = Connect(2, 20.0);
  ASSERT_EQ(w.ranks.size(), 2u);
  OnEveryRank(w.ranks, [](CommGroup& g) {
    std::vector<double> x(1000, 1.0);
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(g.AllReduce(std::span<double>(x), ReduceOp::kSum).ok());
    }
    EXPECT_EQ(x[0], std::pow(2.0, 50));
  });
  // Fifty sequential all-reduces of one size need one block per rank.
  for (const auto& m : w.memories) EXPECT_EQ(m->allocations(), 1);
  w.ranks.clear();  // FakeDeviceMemory's destructor checks that every block was released
}

TEST(HostStaging, OutOfDeviceMemoryIsAnErrorNamingTheOperation) {
  StagedWorld w = Connect(1, 20.0);
  ASSERT_EQ(w.ranks.size(), 1u);
  w.memories[0]->set_fail_allocations(true);
  std::vector<float> x(4, 1.0f);
  absl::Status s = w.ranks[0]->AllReduce(std::span<float>(x), ReduceOp::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("all_reduce"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of memory"));
}

TEST(HostStaging, RankThatNeverJoinsIsNamedWithinTheTimeout) {
  StagedWorld w = Connect(3, 0.3);
  ASSERT_EQ(w.ranks.size(), 3u);
  std::vector<std::vector<float>> buffers(3);
  OnEveryRank(w.ranks, [&buffers](CommGroup& g) {
    CheckMissingRankInAllReduce(g, 2, buffers[static_cast<size_t>(g.rank())]);
  });
}

}  // namespace
}  // namespace testbed::testing
