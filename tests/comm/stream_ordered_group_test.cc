// The emulation of NCCL's ordering rules (stream_ordered_group.h) over the local
// communicator: it passes the conformance checks under the rules the nccl communicator's own
// tests use, and it hangs (then fails at the deadline) or refuses where NCCL would hang or pair
// the wrong messages, so that a test run through it means something.
#include "stream_ordered_group.h"

#include <chrono>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "comm_loader.h"
#include "conformance.h"
#include "on_every_rank.h"

namespace testbed::testing {
namespace {

using ::testing::HasSubstr;

ConnectedWorld Connect(int n, double timeout_s) {
  ConnectedWorld w = ConnectThreadRanks(TESTBED_LOCAL_PLUGIN, "local", n, {{"timeout_s", timeout_s}});
  w.ranks = StreamOrdered(std::move(w.ranks));
  return w;
}

class StreamOrderedConformance : public ::testing::TestWithParam<int> {};

// The rules of the nccl communicator's tests (tests/plugins/nccl).
TEST_P(StreamOrderedConformance, EveryOperationMatchesTheSerialReference) {
  ConnectedWorld w = Connect(GetParam(), 20.0);
  ASSERT_EQ(static_cast<int>(w.ranks.size()), GetParam());
  OnEveryRank(w.ranks, [](CommGroup& g) {
    HostSpace host;
    CheckEverything(g, host,
                    P2pFeatures{.sends_to_self = false,
                                .reorders_by_tag = false,
                                .larger_receive = false,
                                .sends_wait_for_receives = true});
  });
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, StreamOrderedConformance, ::testing::Values(2, 3, 4));

// Two ranks whose first operation is a send to each other wait for each other, as under NCCL
// (with MPI or the local communicator the sends would finish).
TEST(StreamOrdered, SendsToEachOtherHang) {
  ConnectedWorld w = Connect(2, 0.5);
  ASSERT_EQ(w.ranks.size(), 2u);
  const auto start = std::chrono::steady_clock::now();
  OnEveryRank(w.ranks, [](CommGroup& g) {
    const std::int32_t out = g.rank();
    std::int32_t in = -1;
    auto s = g.ISend(&out, 1, DataType::kInt32, 1 - g.rank(), 0);
    auto r = g.IRecv(&in, 1, DataType::kInt32, 1 - g.rank(), 0);
    ASSERT_TRUE(s.ok() && r.ok());
    absl::Status sent = (*s)->Wait();
    EXPECT_EQ(sent.code(), absl::StatusCode::kDeadlineExceeded) << sent;
    EXPECT_FALSE((*r)->Wait().ok());
  });
  // Not a speed check: only fails if the emulation hung beyond its deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// The same exchange ordered (one side receives first) goes through.
TEST(StreamOrdered, OrderedExchangeFinishes) {
  ConnectedWorld w = Connect(2, 20.0);
  ASSERT_EQ(w.ranks.size(), 2u);
  OnEveryRank(w.ranks, [](CommGroup& g) {
    const std::int32_t out = 10 + g.rank();
    std::int32_t in = -1;
    const int peer = 1 - g.rank();
    if (g.rank() == 0) {
      ASSERT_TRUE(g.Send(&out, 1, DataType::kInt32, peer, 0).ok());
      ASSERT_TRUE(g.Recv(&in, 1, DataType::kInt32, peer, 0).ok());
    } else {
      ASSERT_TRUE(g.Recv(&in, 1, DataType::kInt32, peer, 0).ok());
      ASSERT_TRUE(g.Send(&out, 1, DataType::kInt32, peer, 0).ok());
    }
    EXPECT_EQ(in, 10 + peer);
  });
}

// Operations of one endpoint start one after the other: the second waits for the first.
TEST(StreamOrdered, AnOperationStartsOnlyAfterThePreviousOneFinished) {
  ConnectedWorld w = Connect(2, 20.0);
  ASSERT_EQ(w.ranks.size(), 2u);
  auto* rank0 = static_cast<StreamOrderedGroup*>(w.ranks[0].get());
  std::int32_t x = 0, y = 0;
  // Rank 0 queues a receive nobody has sent yet, then an all-reduce: the all-reduce must not
  // start while the receive waits.
  auto r = rank0->IRecv(&x, 1, DataType::kInt32, 1, 0);
  auto a = rank0->IAllReduce(&y, &y, 1, DataType::kInt32, ReduceOp::kSum);
  ASSERT_TRUE(r.ok() && a.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(rank0->started(), 1);
  std::int32_t one = 1, z = 0;
  ASSERT_TRUE(w.ranks[1]->Send(&one, 1, DataType::kInt32, 0, 0).ok());
  ASSERT_TRUE(w.ranks[1]->AllReduce(&z, &z, 1, DataType::kInt32, ReduceOp::kSum).ok());
  ASSERT_TRUE((*r)->Wait().ok());
  ASSERT_TRUE((*a)->Wait().ok());
  EXPECT_EQ(x, 1);
  EXPECT_EQ(rank0->started(), 2);
}

// Pairing is by posting order only: a receive meeting a send of another tag is an error that
// names both (NCCL would deliver the wrong message).
TEST(StreamOrdered, ReceiveMeetingAnotherTagIsRefused) {
  ConnectedWorld w = Connect(2, 2.0);
  ASSERT_EQ(w.ranks.size(), 2u);
  OnEveryRank(w.ranks, [](CommGroup& g) {
    std::int32_t v = 5;
    if (g.rank() == 0) {
      (void)g.Send(&v, 1, DataType::kInt32, 1, 3);  // its acknowledgement never comes
    } else {
      absl::Status s = g.Recv(&v, 1, DataType::kInt32, 0, 4);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("(tag 4, count 1)"));
      EXPECT_THAT(std::string(s.message()), HasSubstr("(tag 3, count 1)"));
    }
  });
}

}  // namespace
}  // namespace testbed::testing
