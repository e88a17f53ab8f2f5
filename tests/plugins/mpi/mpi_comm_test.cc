// The mpi communicator, one rank per process (run under mpirun by ctest). Every process
// runs the same tests in the same order; each test connects a fresh world.
#include <chrono>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "comm_loader.h"
#include "conformance.h"

namespace testbed::testing {
namespace {

using ::testing::HasSubstr;

// The plugin stays loaded for the whole process: unloading it finalises MPI, which cannot
// be started again.
Registry& PluginRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry();
    auto* loader = new PluginLoader(*r);
    auto loaded = loader->Load(TESTBED_MPI_PLUGIN);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return r;
  }();
  return *registry;
}

std::unique_ptr<CommGroup> ConnectWorld(std::shared_ptr<Communicator>& keep, double timeout_s,
                                        const std::string& all_reduce = "library",
                                        std::int64_t ring_segment_bytes = 256 << 10) {
  auto comm = CreateCommunicator(
      PluginRegistry(), "mpi",
      {{"timeout_s", timeout_s}, {"all_reduce", all_reduce}, {"ring_segment_bytes", ring_segment_bytes}});
  EXPECT_TRUE(comm.ok()) << comm.status();
  if (!comm.ok()) return nullptr;
  keep = *comm;
  auto ranks = keep->Connect(0);
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  if (!ranks.ok() || ranks->size() != 1) return nullptr;
  return std::move((*ranks)[0]);
}

TEST(MpiComm, EveryOperationMatchesTheSerialReference) {
  std::shared_ptr<Communicator> comm;
  auto world = ConnectWorld(comm, 30.0);
  ASSERT_NE(world, nullptr);
  HostSpace host;
  CheckEverything(*world, host);
}

// The communicator's own ring all-reduce: every collective again (the all-reduces with
// counts below, at and above the member count, in place, several in flight at once, on
// sub-groups), so the ring is held to the same serial reference as MPI_Iallreduce. Once with
// chunks that fit in one segment, once with 64-byte segments: many per chunk, more than the
// receive window, and a last one shorter than the others.
TEST(MpiComm, RingAllReduceMatchesTheSerialReference) {
  for (std::int64_t segment_bytes : {std::int64_t{256} << 10, std::int64_t{64}}) {
    SCOPED_TRACE(::testing::Message() << "ring_segment_bytes = " << segment_bytes);
    std::shared_ptr<Communicator> comm;
    auto world = ConnectWorld(comm, 30.0, "ring", segment_bytes);
    ASSERT_NE(world, nullptr);
    HostSpace host;
    CheckEverything(*world, host);
  }
}

// Many ring all-reduces in flight at once on one group, finished in reverse order: each
// must take only its own messages (they travel on tags derived from the operation number).
TEST(MpiComm, ConcurrentRingAllReducesKeepTheirOwnMessages) {
  std::shared_ptr<Communicator> comm;
  auto world = ConnectWorld(comm, 30.0, "ring", 1024);
  ASSERT_NE(world, nullptr);
  const int n = world->size();
  constexpr int kOps = 12;
  constexpr std::int64_t kCount = 4099;
  std::vector<std::vector<std::int64_t>> data(kOps, std::vector<std::int64_t>(kCount));
  std::vector<CommRequestPtr> requests;
  for (int op = 0; op < kOps; ++op) {
    for (std::int64_t i = 0; i < kCount; ++i) data[op][static_cast<size_t>(i)] = (op + 1) * 1000003 * (world->rank() + 1) + i;
    auto r = world->IAllReduce(data[op].data(), data[op].data(), kCount, DataType::kInt64, ReduceOp::kSum);
    ASSERT_TRUE(r.ok()) << r.status();
    requests.push_back(std::move(*r));
  }
  for (int op = kOps - 1; op >= 0; --op) {
    absl::Status s = requests[static_cast<size_t>(op)]->Wait();
    ASSERT_TRUE(s.ok()) << s;
    const std::int64_t ranks_sum = static_cast<std::int64_t>(n) * (n + 1) / 2;
    for (std::int64_t i = 0; i < kCount; i += 97) {
      EXPECT_EQ(data[op][static_cast<size_t>(i)], (op + 1) * 1000003 * ranks_sum + n * i) << "operation " << op;
    }
  }
}

// Members may wait for their ring all-reduces in different orders: waiting for one advances
// the others (as MPI's progress engine does for its own collectives), or this would hang.
TEST(MpiComm, RingAllReducesMayBeWaitedForInAnyOrder) {
  std::shared_ptr<Communicator> comm;
  auto world = ConnectWorld(comm, 30.0, "ring", 4096);
  ASSERT_NE(world, nullptr);
  const int n = world->size();
  constexpr std::int64_t kCount = 100003;  // many segments per chunk
  std::vector<float> a(kCount, 1.0f), b(kCount, 2.0f);
  auto ra = world->IAllReduce(a.data(), a.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
  auto rb = world->IAllReduce(b.data(), b.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(ra.ok() && rb.ok());
  if (world->rank() == 0) {
    ASSERT_TRUE((*rb)->Wait().ok());
    ASSERT_TRUE((*ra)->Wait().ok());
  } else {
    ASSERT_TRUE((*ra)->Wait().ok());
    ASSERT_TRUE((*rb)->Wait().ok());
  }
  EXPECT_EQ(a, std::vector<float>(kCount, static_cast<float>(n)));
  EXPECT_EQ(b, std::vector<float>(kCount, 2.0f * static_cast<float>(n)));
}

TEST(MpiComm, RingAllReduceNamesALateRankWithinTheTimeout) {
  std::shared_ptr<Communicator> comm, sync_comm;
  auto world = ConnectWorld(comm, 0.5, "ring");
  auto sync = ConnectWorld(sync_comm, 30.0);
  ASSERT_NE(world, nullptr);
  ASSERT_NE(sync, nullptr);
  const int last = world->size() - 1;
  std::vector<float> data(16, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  if (world->rank() == last) {
    // Arrives after the others gave up. Unlike OpenMPI's collective, an abandoned ring does
    // not run on without its members, so the late rank times out too, with an error.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    absl::Status s = world->AllReduce(data.data(), data.data(), 16, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("(ring)"));
  } else {
    CheckMissingRankInAllReduce(*world, last, data);
  }
  // Not a speed check: only fails if a rank hung far beyond its deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_TRUE(sync->Barrier().ok());
}

TEST(MpiComm, WrongWorldSizeIsRefused) {
  auto comm = CreateCommunicator(PluginRegistry(), "mpi", {});
  ASSERT_TRUE(comm.ok());
  auto ranks = (*comm)->Connect(1000);
  EXPECT_EQ(ranks.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ranks.status().message()), HasSubstr("mpirun -np 1000"));
}

TEST(MpiComm, LateRankIsNamedWithinTheTimeout) {
  std::shared_ptr<Communicator> comm, sync_comm;
  auto world = ConnectWorld(comm, 0.5);
  auto sync = ConnectWorld(sync_comm, 30.0);
  ASSERT_NE(world, nullptr);
  ASSERT_NE(sync, nullptr);
  const int last = world->size() - 1;
  // Outlives the abandoned operation, which completes once the late rank joins.
  std::vector<float> data(16, 1.0f);
  if (world->rank() == last) {
    // Arrives long after the others gave up, then completes the operation they left running.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_TRUE(world->AllReduce(data.data(), data.data(), 16, DataType::kFloat32, ReduceOp::kSum).ok());
  } else {
    const auto start = std::chrono::steady_clock::now();
    CheckMissingRankInAllReduce(*world, last, data);
    // Not a speed check: only fails if the rank hung far beyond its deadline.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  }
  EXPECT_TRUE(sync->Barrier().ok());
}

// A member that starts an all-reduce and then stops (as a rank killed inside it would) is
// named: every other member started it too, and the stopped one is the one that sends no
// pulses. On the plugin's own ring, which cannot finish without every member's progress
// (OpenMPI's all-reduce over shared memory may finish on the others once the stopped rank has
// posted its part; the message is the same code's when it does not).
TEST(MpiComm, RankThatStopsInsideAnAllReduceIsNamed) {
  for (const std::string all_reduce : {"ring"}) {
    std::shared_ptr<Communicator> comm, sync_comm;
    auto world = ConnectWorld(comm, 0.5, all_reduce);
    auto sync = ConnectWorld(sync_comm, 30.0);
    ASSERT_NE(world, nullptr);
    ASSERT_NE(sync, nullptr);
    const int last = world->size() - 1;
    // 4 MiB: more than MPI sends eagerly and several ring segments, so that nobody can finish
    // without the stopped rank's further progress.
    constexpr std::int64_t kCount = 1 << 20;
    std::vector<float> data(kCount, 1.0f);
    if (world->rank() == last) {
      // Starts it, then does nothing with MPI for longer than the others wait; then finishes
      // the operation the others left running.
      auto started = world->IAllReduce(data.data(), data.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
      ASSERT_TRUE(started.ok()) << started.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      (void)(*started)->Wait();
    } else {
      absl::Status s = world->AllReduce(data.data(), data.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << all_reduce << ": " << s;
      // It alone: the live members, which waited and pulsed as long, are not among the silent.
      EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("every member started it, then rank(s) ", last,
                                                                   " (world rank ", last, ") fell silent")))
          << all_reduce;
    }
    EXPECT_TRUE(sync->Barrier().ok());
  }
}

TEST(MpiComm, ReceiveFromSilentPeerTimesOutAndIsWithdrawn) {
  std::shared_ptr<Communicator> comm, sync_comm;
  auto world = ConnectWorld(comm, 0.3);
  auto sync = ConnectWorld(sync_comm, 30.0);
  ASSERT_NE(world, nullptr);
  ASSERT_NE(sync, nullptr);
  std::int32_t x = 0;
  if (world->rank() == 0) {
    absl::Status s = world->Recv(&x, 1, DataType::kInt32, 1, 9);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("recv from rank 1 (world rank 1)"));
  }
  ASSERT_TRUE(sync->Barrier().ok());
  // The withdrawn receive must not swallow the next message with that tag.
  if (world->rank() == 1) {
    std::int32_t y = 42;
    EXPECT_TRUE(world->Send(&y, 1, DataType::kInt32, 0, 9).ok());
  } else if (world->rank() == 0) {
    absl::Status s = world->Recv(&x, 1, DataType::kInt32, 1, 9);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(x, 42);
  }
  EXPECT_TRUE(sync->Barrier().ok());
}

TEST(MpiComm, SubGroupMemberThatNeverComesIsNamed) {
  std::shared_ptr<Communicator> comm, sync_comm;
  auto world = ConnectWorld(comm, 0.3);
  auto sync = ConnectWorld(sync_comm, 30.0);
  ASSERT_NE(world, nullptr);
  ASSERT_NE(sync, nullptr);
  if (world->rank() == 0) {
    auto sub = world->NewGroup({0, 1});
    EXPECT_EQ(sub.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(std::string(sub.status().message()), HasSubstr("rank(s) 1 did not join"));
  }
  EXPECT_TRUE(sync->Barrier().ok());
}

}  // namespace
}  // namespace testbed::testing
