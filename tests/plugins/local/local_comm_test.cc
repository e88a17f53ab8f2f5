// The local communicator: ranks are threads. Runs the conformance checks on several group
// sizes (including sizes that divide nothing evenly), then the failure cases.
#include <chrono>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "comm_loader.h"
#include "conformance.h"
#include "on_every_rank.h"

namespace testbed::testing {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<LoadedCommunicator> Load(double timeout_s) {
  auto loaded = LoadCommunicator(TESTBED_LOCAL_PLUGIN, "local", {{"timeout_s", timeout_s}});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? std::move(*loaded) : nullptr;
}

class LocalConformance : public ::testing::TestWithParam<int> {};

TEST_P(LocalConformance, EveryOperationMatchesTheSerialReference) {
  auto loaded = Load(20.0);
  ASSERT_NE(loaded, nullptr);
  auto ranks = loaded->comm->Connect(GetParam());
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  ASSERT_EQ(static_cast<int>(ranks->size()), GetParam());
  OnEveryRank(*ranks, [](CommGroup& g) {
    HostSpace host;
    CheckEverything(g, host);
  });
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, LocalConformance, ::testing::Values(1, 2, 3, 4, 5));

TEST(LocalComm, RankThatNeverJoinsIsNamedWithinTheTimeout) {
  auto loaded = Load(0.3);
  ASSERT_NE(loaded, nullptr);
  auto ranks = loaded->comm->Connect(4);
  ASSERT_TRUE(ranks.ok());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<float>> buffers(4);
  OnEveryRank(*ranks, [&buffers](CommGroup& g) {
    CheckMissingRankInAllReduce(g, 3, buffers[static_cast<size_t>(g.rank())]);
  });
  // Not a speed check: a generous bound that only fails if the others hang.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(LocalComm, RankThatDiesIsNamed) {
  auto loaded = Load(0.3);
  ASSERT_NE(loaded, nullptr);
  auto ranks = loaded->comm->Connect(3);
  ASSERT_TRUE(ranks.ok());
  (*ranks)[1].reset();  // rank 1 is gone before the operation
  std::vector<std::thread> threads;
  for (int r : {0, 2}) {
    threads.emplace_back([&, r] {
      CommGroup& g = *(*ranks)[static_cast<size_t>(r)];
      std::vector<double> x(8, 1.0);
      absl::Status s = g.AllReduce(x.data(), x.data(), 8, DataType::kFloat64, ReduceOp::kMax);
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("1 (world rank 1)"));
    });
  }
  for (auto& t : threads) t.join();
}

TEST(LocalComm, ReceiveFromSilentPeerTimesOut) {
  auto loaded = Load(0.2);
  ASSERT_NE(loaded, nullptr);
  auto ranks = loaded->comm->Connect(2);
  ASSERT_TRUE(ranks.ok());
  std::int32_t x = 0;
  absl::Status s = (*ranks)[0]->Recv(&x, 1, DataType::kInt32, 1, 5);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("recv from rank 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("tag 5"));
  // The withdrawn receive must not match a later send: the send now waits for a new receive.
  std::int32_t y = 42;
  auto send = (*ranks)[1]->ISend(&y, 1, DataType::kInt32, 0, 5);
  ASSERT_TRUE(send.ok());
  absl::Status r = (*ranks)[0]->Recv(&x, 1, DataType::kInt32, 1, 5);
  EXPECT_TRUE(r.ok()) << r;
  EXPECT_TRUE((*send)->Wait().ok());
  EXPECT_EQ(x, 42);
}

TEST(LocalComm, SubGroupMemberThatNeverComesIsNamed) {
  auto loaded = Load(0.2);
  ASSERT_NE(loaded, nullptr);
  auto ranks = loaded->comm->Connect(3);
  ASSERT_TRUE(ranks.ok());
  auto sub = (*ranks)[0]->NewGroup({0, 2});
  EXPECT_EQ(sub.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(sub.status().message()), HasSubstr("rank(s) 2 did not join"));
}

TEST(LocalComm, MismatchedCollectivesFailOnEveryRank) {
  auto loaded = Load(5.0);
  ASSERT_NE(loaded, nullptr);
  auto ranks = loaded->comm->Connect(2);
  ASSERT_TRUE(ranks.ok());
  OnEveryRank(*ranks, [](CommGroup& g) {
    std::vector<float> x(10, 1.0f);
    // Rank 0 reduces 10 elements, rank 1 only 9.
    absl::Status s = g.AllReduce(x.data(), x.data(), g.rank() == 0 ? 10 : 9, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("count"));
    EXPECT_EQ(x, std::vector<float>(10, 1.0f)) << "a rejected collective must not touch the buffers";
  });
}

// The local communicator promises more than bitwise agreement between ranks: the sum is the
// serial one, member 0 + member 1 + ... in rank order.
TEST(LocalComm, FloatSumIsTheSerialRankOrderSum) {
  auto loaded = Load(20.0);
  ASSERT_NE(loaded, nullptr);
  constexpr int kRanks = 3;
  constexpr std::int64_t kCount = 9001;
  std::vector<std::vector<float>> inputs(kRanks, std::vector<float>(kCount));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  for (auto& in : inputs) {
    for (float& v : in) v = dist(rng) * dist(rng);
  }
  std::vector<float> expected(kCount);
  for (std::int64_t i = 0; i < kCount; ++i) {
    float acc = inputs[0][static_cast<size_t>(i)];
    for (int k = 1; k < kRanks; ++k) acc += inputs[static_cast<size_t>(k)][static_cast<size_t>(i)];
    expected[static_cast<size_t>(i)] = acc;
  }
  auto ranks = loaded->comm->Connect(kRanks);
  ASSERT_TRUE(ranks.ok());
  std::vector<std::vector<float>> outputs(kRanks, std::vector<float>(kCount));
  OnEveryRank(*ranks, [&](CommGroup& g) {
    const auto r = static_cast<size_t>(g.rank());
    ASSERT_TRUE(g.AllReduce(inputs[r].data(), outputs[r].data(), kCount, DataType::kFloat32, ReduceOp::kSum).ok());
  });
  for (const auto& out : outputs) EXPECT_EQ(out, expected);
}

}  // namespace
}  // namespace testbed::testing
