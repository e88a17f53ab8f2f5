#include "conformance.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace testbed::testing {
namespace {

using ::testing::HasSubstr;

// Small integer values, so that sums are exact in every type and any reduction order.
template <typename T>
T Value(int rank, std::int64_t i, int salt) {
  int v = static_cast<int>((rank * 37 + i * 11 + salt * 5) % 13);
  if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>) v -= 6;
  return static_cast<T>(v);
}

// Arbitrary bit patterns for bit_or.
template <typename T>
T Bits(int rank, std::int64_t i, int salt) {
  std::uint64_t x = static_cast<std::uint64_t>(rank * 1000003 + i * 7919 + salt) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  // Sparse bits, so the OR of a few ranks is not all ones.
  return static_cast<T>(x & (x >> 7) & (x >> 13));
}

template <typename T>
T Input(ReduceOp op, int rank, std::int64_t i, int salt) {
  return op == ReduceOp::kBitOr ? Bits<T>(rank, i, salt) : Value<T>(rank, i, salt);
}

template <typename T>
T Apply(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum: return static_cast<T>(a + b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kBitOr:
      if constexpr (std::is_unsigned_v<T>) return static_cast<T>(a | b);
      return a;
  }
  return a;
}

// The serial reference: op over ranks 0..n-1 of Input(op, rank, i, salt).
template <typename T>
T Reduced(ReduceOp op, int n, std::int64_t i, int salt) {
  T acc = Input<T>(op, 0, i, salt);
  for (int k = 1; k < n; ++k) acc = Apply(op, acc, Input<T>(op, k, i, salt));
  return acc;
}

std::int64_t Sum(const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); }

template <typename T>
std::string Where(const CommGroup& g, const char* what, ReduceOp op, std::int64_t count, bool in_place) {
  return absl::StrCat(what, " ", DataTypeName(DataTypeOf<T>()), " ", ReduceOpName(op), " count ", count,
                      in_place ? " in place" : "", " on rank ", g.rank(), " of ", g.size());
}

template <typename T>
void AllReduceOne(CommGroup& g, BufferSpace& space, ReduceOp op, std::int64_t count, bool in_place, int salt) {
  std::vector<T> mine(static_cast<size_t>(count)), expected(static_cast<size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    mine[static_cast<size_t>(i)] = Input<T>(op, g.rank(), i, salt);
    expected[static_cast<size_t>(i)] = Reduced<T>(op, g.size(), i, salt);
  }
  SpaceBuffer<T> send(space, mine);
  SpaceBuffer<T> recv(space, static_cast<size_t>(count));
  T* out = in_place ? send.data() : recv.data();
  absl::Status s = g.AllReduce(send.data(), out, count, DataTypeOf<T>(), op);
  const std::string where = Where<T>(g, "all_reduce", op, count, in_place);
  ASSERT_TRUE(s.ok()) << where << ": " << s;
  EXPECT_EQ(in_place ? send.Get() : recv.Get(), expected) << where;
  if (!in_place) {
    EXPECT_EQ(send.Get(), mine) << where << ": input changed";
  }
}

template <typename T>
void AllReduceType(CommGroup& g, BufferSpace& space, int& salt) {
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
  if constexpr (std::is_unsigned_v<T>) ops.push_back(ReduceOp::kBitOr);
  // 70001 elements cross the local communicator's block size several times.
  for (ReduceOp op : ops) {
    for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{5}, std::int64_t{1027}, std::int64_t{70001}}) {
      for (bool in_place : {false, true}) AllReduceOne<T>(g, space, op, count, in_place, ++salt);
    }
  }
}

template <typename T>
void BroadcastType(CommGroup& g, BufferSpace& space, int& salt) {
  constexpr std::int64_t kCount = 1031;
  for (int root = 0; root < g.size(); ++root) {
    ++salt;
    std::vector<T> mine(kCount), expected(kCount);
    for (std::int64_t i = 0; i < kCount; ++i) {
      mine[static_cast<size_t>(i)] = Value<T>(g.rank(), i, salt);
      expected[static_cast<size_t>(i)] = Value<T>(root, i, salt);
    }
    SpaceBuffer<T> buf(space, mine);
    absl::Status s = g.Broadcast(buf.data(), kCount, DataTypeOf<T>(), root);
    ASSERT_TRUE(s.ok()) << "broadcast from " << root << ": " << s;
    EXPECT_EQ(buf.Get(), expected) << "broadcast " << DataTypeName(DataTypeOf<T>()) << " from root " << root
                                   << " on rank " << g.rank();
  }
}

template <typename T>
void AllGatherType(CommGroup& g, BufferSpace& space, int& salt) {
  const int n = g.size();
  for (int variant = 0; variant < 3; ++variant) {
    ++salt;
    // Uneven counts with zeros; then even counts; then uneven again, in place.
    std::vector<std::int64_t> counts(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) counts[static_cast<size_t>(k)] = variant == 1 ? 5 : (k * 3 + 1) % 4 + (k == 0 ? 2 : 0);
    const bool in_place = variant == 2;
    std::vector<T> expected;
    std::int64_t my_offset = 0;
    for (int k = 0; k < n; ++k) {
      if (k == g.rank()) my_offset = static_cast<std::int64_t>(expected.size());
      for (std::int64_t i = 0; i < counts[static_cast<size_t>(k)]; ++i) expected.push_back(Value<T>(k, i, salt));
    }
    std::vector<T> mine(expected.begin() + my_offset, expected.begin() + my_offset + counts[static_cast<size_t>(g.rank())]);
    SpaceBuffer<T> recv(space, expected.size());
    SpaceBuffer<T> send(space, mine.empty() ? std::vector<T>(1) : mine);
    absl::Status s;
    if (in_place) {
      std::vector<T> staged(expected.size(), T{});
      std::copy(mine.begin(), mine.end(), staged.begin() + my_offset);
      recv.Set(staged);
      s = g.AllGatherV(recv.data() + my_offset, recv.data(), counts, DataTypeOf<T>());
    } else if (variant == 1) {
      s = g.AllGather(send.data(), recv.data(), 5, DataTypeOf<T>());
    } else {
      s = g.AllGatherV(send.data(), recv.data(), counts, DataTypeOf<T>());
    }
    ASSERT_TRUE(s.ok()) << "all_gather variant " << variant << ": " << s;
    EXPECT_EQ(recv.Get(), expected) << "all_gather " << DataTypeName(DataTypeOf<T>()) << " variant " << variant
                                    << " on rank " << g.rank();
  }
}

template <typename T>
void ReduceScatterType(CommGroup& g, BufferSpace& space, ReduceOp op, int& salt) {
  const int n = g.size();
  for (int variant = 0; variant < 2; ++variant) {
    ++salt;
    std::vector<std::int64_t> counts(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) counts[static_cast<size_t>(k)] = variant == 1 ? 3 : (k * 5 + 2) % 7;
    const std::int64_t total = Sum(counts);
    std::int64_t offset = 0;
    for (int k = 0; k < g.rank(); ++k) offset += counts[static_cast<size_t>(k)];
    std::vector<T> mine(static_cast<size_t>(total));
    for (std::int64_t i = 0; i < total; ++i) mine[static_cast<size_t>(i)] = Input<T>(op, g.rank(), i, salt);
    std::vector<T> expected;
    for (std::int64_t i = 0; i < counts[static_cast<size_t>(g.rank())]; ++i) expected.push_back(Reduced<T>(op, n, offset + i, salt));
    SpaceBuffer<T> send(space, mine.empty() ? std::vector<T>(1) : mine);
    SpaceBuffer<T> recv(space, std::max<size_t>(expected.size(), 1));
    absl::Status s = variant == 1 ? g.ReduceScatter(send.data(), recv.data(), 3, DataTypeOf<T>(), op)
                                  : g.ReduceScatterV(send.data(), recv.data(), counts, DataTypeOf<T>(), op);
    ASSERT_TRUE(s.ok()) << "reduce_scatter: " << s;
    std::vector<T> got = recv.Get();
    got.resize(expected.size());
    EXPECT_EQ(got, expected) << "reduce_scatter " << DataTypeName(DataTypeOf<T>()) << " " << ReduceOpName(op)
                             << " variant " << variant << " on rank " << g.rank();
  }
}

template <typename T>
void AllToAllType(CommGroup& g, BufferSpace& space, int& salt) {
  const int n = g.size();
  const int me = g.rank();
  for (int variant = 0; variant < 2; ++variant) {
    ++salt;
    auto count = [&](int src, int dst) -> std::int64_t { return variant == 1 ? 2 : (src + 2 * dst + 1) % 4; };
    // Element j of what src sends to dst.
    auto value = [&](int src, int dst, std::int64_t j) { return Value<T>(src, dst * 1000 + j, salt); };
    std::vector<std::int64_t> send_counts, recv_counts;
    std::vector<T> mine, expected;
    for (int p = 0; p < n; ++p) {
      send_counts.push_back(count(me, p));
      recv_counts.push_back(count(p, me));
      for (std::int64_t j = 0; j < count(me, p); ++j) mine.push_back(value(me, p, j));
      for (std::int64_t j = 0; j < count(p, me); ++j) expected.push_back(value(p, me, j));
    }
    SpaceBuffer<T> send(space, mine.empty() ? std::vector<T>(1) : mine);
    SpaceBuffer<T> recv(space, std::max<size_t>(expected.size(), 1));
    absl::Status s = variant == 1 ? g.AllToAll(send.data(), recv.data(), 2, DataTypeOf<T>())
                                  : g.AllToAllV(send.data(), send_counts, recv.data(), recv_counts, DataTypeOf<T>());
    ASSERT_TRUE(s.ok()) << "all_to_all: " << s;
    std::vector<T> got = recv.Get();
    got.resize(expected.size());
    EXPECT_EQ(got, expected) << "all_to_all " << DataTypeName(DataTypeOf<T>()) << " variant " << variant << " on rank "
                             << me;
  }
}

template <typename F>
void ForEachType(F&& f) {
  f(float{});
  f(double{});
  f(std::int32_t{});
  f(std::int64_t{});
  f(std::uint8_t{});
  f(std::uint32_t{});
  f(std::uint64_t{});
}

}  // namespace

void CheckAllReduce(CommGroup& group, BufferSpace& space) {
  int salt = 0;
  ForEachType([&](auto t) { AllReduceType<decltype(t)>(group, space, salt); });
}

void CheckBroadcast(CommGroup& group, BufferSpace& space) {
  int salt = 100;
  ForEachType([&](auto t) { BroadcastType<decltype(t)>(group, space, salt); });
}

void CheckGatherScatter(CommGroup& group, BufferSpace& space) {
  int salt = 200;
  ForEachType([&](auto t) {
    using T = decltype(t);
    AllGatherType<T>(group, space, salt);
    ReduceScatterType<T>(group, space, ReduceOp::kSum, salt);
    ReduceScatterType<T>(group, space, ReduceOp::kMax, salt);
    if constexpr (std::is_unsigned_v<T>) ReduceScatterType<T>(group, space, ReduceOp::kBitOr, salt);
    AllToAllType<T>(group, space, salt);
  });
}

void CheckPointToPoint(CommGroup& group, BufferSpace& space, const P2pFeatures& features) {
  const int n = group.size();
  const int me = group.rank();
  const int next = (me + 1) % n;
  const int prev = (me + n - 1) % n;
  // A ring shift: everyone sends and receives at once, so both sides are asynchronous.
  if (n > 1 || features.sends_to_self) {
    std::vector<std::int64_t> mine(777);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = Value<std::int64_t>(me, static_cast<std::int64_t>(i), 300);
    SpaceBuffer<std::int64_t> send(space, mine);
    SpaceBuffer<std::int64_t> recv(space, mine.size());
    absl::StatusOr<CommRequestPtr> r, s;
    if (features.sends_wait_for_receives && me % 2 == 0) {
      // Even ranks send first, odd ranks receive first: each send meets a posted receive.
      s = group.ISend(send.data(), 777, DataType::kInt64, next, 7);
      r = group.IRecv(recv.data(), 777, DataType::kInt64, prev, 7);
    } else {
      r = group.IRecv(recv.data(), 777, DataType::kInt64, prev, 7);
      s = group.ISend(send.data(), 777, DataType::kInt64, next, 7);
    }
    ASSERT_TRUE(r.ok() && s.ok()) << r.status() << " " << s.status();
    EXPECT_TRUE((*s)->Wait().ok());
    absl::Status rs = (*r)->Wait();
    ASSERT_TRUE(rs.ok()) << rs;
    std::vector<std::int64_t> expected(mine.size());
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = Value<std::int64_t>(prev, static_cast<std::int64_t>(i), 300);
    EXPECT_EQ(recv.Get(), expected) << "ring shift on rank " << me;
  }
  // Two messages from rank 0 to the last rank with tags 1 and 2, received in the other
  // order where tags reorder, and into larger buffers where allowed.
  if (n >= 2 && (me == 0 || me == n - 1)) {
    const std::vector<float> a(6, 1.5f), b(4, -2.0f);
    const std::int64_t room_a = features.larger_receive ? 10 : 6, room_b = features.larger_receive ? 10 : 4;
    if (me == 0) {
      SpaceBuffer<float> sa(space, a), sb(space, b);
      auto s1 = group.ISend(sa.data(), 6, DataType::kFloat32, n - 1, 1);
      auto s2 = group.ISend(sb.data(), 4, DataType::kFloat32, n - 1, 2);
      ASSERT_TRUE(s1.ok() && s2.ok());
      EXPECT_TRUE((*s2)->Wait().ok());
      EXPECT_TRUE((*s1)->Wait().ok());
    } else {
      SpaceBuffer<float> ra(space, std::vector<float>(static_cast<size_t>(room_a), 0.0f));
      SpaceBuffer<float> rb(space, std::vector<float>(static_cast<size_t>(room_b), 0.0f));
      absl::Status s1, s2;
      if (features.reorders_by_tag) {
        s2 = group.Recv(rb.data(), room_b, DataType::kFloat32, 0, 2);
        s1 = group.Recv(ra.data(), room_a, DataType::kFloat32, 0, 1);
      } else {
        auto r1 = group.IRecv(ra.data(), room_a, DataType::kFloat32, 0, 1);
        auto r2 = group.IRecv(rb.data(), room_b, DataType::kFloat32, 0, 2);
        ASSERT_TRUE(r1.ok() && r2.ok());
        s1 = (*r1)->Wait();
        s2 = (*r2)->Wait();
      }
      ASSERT_TRUE(s1.ok() && s2.ok()) << s1 << " " << s2;
      std::vector<float> got_a = ra.Get(), got_b = rb.Get();
      EXPECT_EQ(std::vector<float>(got_a.begin(), got_a.begin() + 6), a);
      EXPECT_EQ(std::vector<float>(got_b.begin(), got_b.begin() + 4), b);
    }
  }
  for (int i = 0; i < 3; ++i) {
    absl::Status s = group.Barrier();
    EXPECT_TRUE(s.ok()) << s;
  }
}

void CheckAsync(CommGroup& group, BufferSpace& space) {
  constexpr int kOps = 4;
  constexpr std::int64_t kCount = 4099;
  std::vector<std::unique_ptr<SpaceBuffer<double>>> bufs;
  std::vector<CommRequestPtr> requests;
  for (int op = 0; op < kOps; ++op) {
    std::vector<double> mine(kCount);
    for (std::int64_t i = 0; i < kCount; ++i) mine[static_cast<size_t>(i)] = Value<double>(group.rank(), i, 400 + op);
    bufs.push_back(std::make_unique<SpaceBuffer<double>>(space, mine));
    auto r = group.IAllReduce(bufs.back()->data(), bufs.back()->data(), kCount, DataType::kFloat64, ReduceOp::kSum);
    ASSERT_TRUE(r.ok()) << r.status();
    requests.push_back(std::move(*r));
  }
  // Poll the first to completion, wait for the rest last to first.
  for (;;) {
    auto done = requests[0]->Test();
    ASSERT_TRUE(done.ok()) << done.status();
    if (*done) break;
  }
  for (int op = kOps - 1; op >= 1; --op) {
    absl::Status s = requests[static_cast<size_t>(op)]->Wait();
    ASSERT_TRUE(s.ok()) << s;
  }
  for (int op = 0; op < kOps; ++op) {
    std::vector<double> expected(kCount);
    for (std::int64_t i = 0; i < kCount; ++i) expected[static_cast<size_t>(i)] = Reduced<double>(ReduceOp::kSum, group.size(), i, 400 + op);
    EXPECT_EQ(bufs[static_cast<size_t>(op)]->Get(), expected) << "async all_reduce " << op;
  }
}

void CheckSameResultEverywhere(CommGroup& group, BufferSpace& space) {
  constexpr std::int64_t kCount = 10007;
  std::mt19937 rng(static_cast<unsigned>(1234 + group.rank()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> mine(kCount);
  for (float& v : mine) v = dist(rng);
  SpaceBuffer<float> buf(space, mine);
  absl::Status s = group.AllReduce(buf.data(), buf.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<float> sum = buf.Get();
  // Exchange a fingerprint of the bits; every member must hold the same.
  std::uint64_t h = 1469598103934665603ull;
  for (float v : sum) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  SpaceBuffer<std::uint64_t> mine_h(space, std::vector<std::uint64_t>{h});
  SpaceBuffer<std::uint64_t> all_h(space, static_cast<size_t>(group.size()));
  s = group.AllGather(mine_h.data(), all_h.data(), 1, DataType::kUInt64);
  ASSERT_TRUE(s.ok()) << s;
  for (std::uint64_t other : all_h.Get()) EXPECT_EQ(other, h) << "ranks disagree on a float sum";
}

void CheckArgumentErrors(CommGroup& group) {
  float f[4] = {};
  auto bad_op = group.IAllReduce(f, f, 4, DataType::kFloat32, ReduceOp::kBitOr);
  EXPECT_EQ(bad_op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_op.status().message()), HasSubstr("bit_or"));
  auto bad_root = group.IBroadcast(f, 4, DataType::kFloat32, group.size());
  EXPECT_EQ(bad_root.status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::int64_t> too_few(static_cast<size_t>(group.size()) + 1, 1);
  auto bad_counts = group.IAllGatherV(f, f, too_few, DataType::kFloat32);
  EXPECT_EQ(bad_counts.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_tag = group.ISend(f, 1, DataType::kFloat32, 0, -1);
  EXPECT_EQ(bad_tag.status().code(), absl::StatusCode::kInvalidArgument);
  auto not_member = group.NewGroup({(group.rank() + 1) % std::max(group.size(), 2)});
  if (group.size() >= 2) {
    EXPECT_EQ(not_member.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

namespace {

// All-reduce of each member's world rank + 1 over `sub`: the sum over its world ranks.
void CheckSubGroupSum(CommGroup& sub, const std::vector<int>& expected_world, BufferSpace& space) {
  EXPECT_EQ(sub.world_ranks(), expected_world);
  const std::int64_t mine = sub.world_ranks()[static_cast<size_t>(sub.rank())] + 1;
  std::int64_t expected = 0;
  for (int w : expected_world) expected += w + 1;
  SpaceBuffer<std::int64_t> buf(space, std::vector<std::int64_t>(3, mine));
  absl::Status s = sub.AllReduce(buf.data(), buf.data(), 3, DataType::kInt64, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(buf.Get(), std::vector<std::int64_t>(3, expected));
}

}  // namespace

void CheckSubGroups(CommGroup& group, BufferSpace& space) {
  const int n = group.size();
  const int me = group.rank();
  // Even and odd ranks.
  std::vector<int> members;
  for (int r = me % 2; r < n; r += 2) members.push_back(r);
  auto half = group.NewGroup(members);
  ASSERT_TRUE(half.ok()) << half.status();
  std::vector<int> world;
  for (int m : members) world.push_back(group.world_ranks()[static_cast<size_t>(m)]);
  EXPECT_EQ((*half)->size(), static_cast<int>(members.size()));
  EXPECT_EQ((*half)->rank(), me / 2);
  CheckSubGroupSum(**half, world, space);
  // A parent operation between two sub-group operations: the groups are independent.
  SpaceBuffer<std::int32_t> one(space, std::vector<std::int32_t>{1});
  absl::Status s = group.AllReduce(one.data(), one.data(), 1, DataType::kInt32, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(one.Get()[0], n);
  CheckGatherScatter(**half, space);

  // Everyone, in reverse order: new rank 0 is the old last rank.
  std::vector<int> reversed(static_cast<size_t>(n));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  auto rev = group.NewGroup(reversed);
  ASSERT_TRUE(rev.ok()) << rev.status();
  EXPECT_EQ((*rev)->rank(), n - 1 - me);
  std::vector<int> rev_world;
  for (int m : reversed) rev_world.push_back(group.world_ranks()[static_cast<size_t>(m)]);
  CheckSubGroupSum(**rev, rev_world, space);
  SpaceBuffer<std::int32_t> root_value(space, std::vector<std::int32_t>{me});
  s = (*rev)->Broadcast(root_value.data(), 1, DataType::kInt32, 0);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(root_value.Get()[0], n - 1) << "broadcast from the reversed group's rank 0";
  // All-to-all-v counts are by group rank: in the reversed group, rank p is world rank n-1-p.
  int a2a_salt = 900;
  AllToAllType<std::int64_t>(**rev, space, a2a_salt);
  AllToAllType<float>(**rev, space, a2a_salt);

  // A sub-group of a sub-group: the first two members of the even/odd half.
  if ((*half)->size() >= 2 && (*half)->rank() < 2) {
    auto pair = (*half)->NewGroup({1, 0});
    ASSERT_TRUE(pair.ok()) << pair.status();
    CheckSubGroupSum(**pair, {world[1], world[0]}, space);
  }
}

void CheckEverything(CommGroup& group, BufferSpace& space, const P2pFeatures& features) {
  CheckAllReduce(group, space);
  CheckBroadcast(group, space);
  CheckGatherScatter(group, space);
  CheckPointToPoint(group, space, features);
  CheckAsync(group, space);
  CheckSameResultEverywhere(group, space);
  CheckArgumentErrors(group);
  CheckSubGroups(group, space);
}

void CheckMissingRankInAllReduce(CommGroup& group, int missing, std::vector<float>& buffer) {
  if (group.rank() == missing) return;
  buffer.assign(16, 1.0f);
  absl::Status s = group.AllReduce(buffer.data(), buffer.data(), 16, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("all_reduce"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat(missing, " (world rank ", group.world_ranks()[static_cast<size_t>(missing)], ")")));
  // The group is broken now: the next operation fails at once with the first error.
  absl::Status again = group.Barrier();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("all_reduce"));
}

}  // namespace testbed::testing
