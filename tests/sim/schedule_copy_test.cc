// Schedule::AppendCopies against its reference, the same tasks added one by one on the other
// devices; and every refusal adds nothing.
#include <gtest/gtest.h>

#include <functional>

#include "testbed/schedule.h"

namespace testbed {
namespace {

// Devices a and b (a pair), their tasks only: a compute on a, a collective over {a, b}, a
// send from a to b with its receive, a kernel on b after the receive; ids from `first`.
void AddPair(Schedule& s, DeviceId a, DeviceId b, TaskId first, int replica) {
  const std::int32_t g = s.Group({a, b});
  Task c;
  c.device = a;
  c.replica = replica;
  c.micro_batch = 0;
  c.work = s.AddWork(ComputeWork{});
  const TaskId compute = s.Add(c, {});
  Task all;
  all.kind = TaskKind::kCollective;
  all.stream = streams::kTensorComm;
  all.group = g;
  all.bytes = 1 << 20;
  all.replica = replica;
  const TaskId reduce = s.Add(all, {compute});
  Task send;
  send.kind = TaskKind::kSend;
  send.stream = streams::kPipelineComm;
  send.device = a;
  send.peer = b;
  send.bytes = 4096;
  send.replica = replica;
  const TaskId sent = s.Add(send, {reduce});
  Task recv = send;
  recv.kind = TaskKind::kRecv;
  recv.stream = streams::kPipelineRecv;
  recv.device = b;
  recv.peer = a;
  const TaskId received = s.Add(recv, {});
  s.Link(received, sent);
  Task k;
  k.kind = TaskKind::kKernel;
  k.device = b;
  k.iteration = 1;
  k.work = s.AddWork(KernelWork{});
  k.replica = replica;
  s.Add(k, {received, reduce});
  ASSERT_EQ(compute, first);
}

TEST(AppendCopies, MakesWhatAddingOneByOneMakes) {
  Schedule copied(4);
  AddPair(copied, 0, 1, 0, 0);
  const std::int32_t to_group = copied.Group({3, 2});
  const std::vector<DeviceId> to_device = {3, 2, -1, -1};
  std::vector<std::int32_t> groups(copied.groups().size(), -1);
  groups[0] = to_group;
  ASSERT_TRUE(copied.AppendCopies(0, 5, to_device, groups, [](Task& t) { t.replica = 1; }));

  Schedule added(4);
  AddPair(added, 0, 1, 0, 0);
  AddPair(added, 3, 2, 5, 1);
  ASSERT_EQ(copied.size(), added.size());
  for (TaskId t = 0; t < static_cast<TaskId>(added.size()); ++t) {
    EXPECT_EQ(copied.Describe(t), added.Describe(t));
    const Task &x = copied.task(t), &y = added.task(t);
    EXPECT_EQ(x.device, y.device);
    EXPECT_EQ(x.peer, y.peer);
    EXPECT_EQ(x.group, y.group);
    EXPECT_EQ(x.match, y.match);
    EXPECT_EQ(x.replica, y.replica);
    EXPECT_EQ(x.iteration, y.iteration);
    const auto dx = copied.deps(t), dy = added.deps(t);
    EXPECT_EQ(std::vector<TaskId>(dx.begin(), dx.end()), std::vector<TaskId>(dy.begin(), dy.end()));
  }
  EXPECT_EQ(copied.groups(), added.groups());
  EXPECT_EQ(copied.iterations(), 2);
  EXPECT_EQ(copied.streams_used(), added.streams_used());
  for (DeviceId d = 0; d < 4; ++d) {
    for (int st = 0; st < streams::kCount; ++st) EXPECT_EQ(copied.Order(d, st), added.Order(d, st)) << d << " " << st;
  }
  EXPECT_TRUE(copied.Check().ok()) << copied.Check();
}

// The largest micro-batch and chunk ids, as Add and AppendCopies (after its edit) leave them:
// the simulator's ledger sizes its keys by them without a pass over the tasks.
TEST(AppendCopies, KeepsTheLargestMicroBatchAndChunk) {
  Schedule s(4);
  EXPECT_EQ(s.micro_batch_ids(), 1);
  EXPECT_EQ(s.chunk_ids(), 1);
  AddPair(s, 0, 1, 0, 0);  // micro-batches 0 and -1, chunk 0
  EXPECT_EQ(s.micro_batch_ids(), 1);
  Task c;
  c.device = 1;
  c.micro_batch = 3;
  c.chunk = 2;
  c.work = s.AddWork(ComputeWork{});
  s.Add(c, {});
  EXPECT_EQ(s.micro_batch_ids(), 4);
  EXPECT_EQ(s.chunk_ids(), 3);
  std::vector<std::int32_t> groups(s.groups().size(), -1);
  groups[0] = s.Group({3, 2});
  ASSERT_TRUE(s.AppendCopies(0, 6, std::vector<DeviceId>{3, 2, -1, -1}, groups, [](Task& t) {
    if (t.micro_batch == 3) t.micro_batch = 9;
  }));
  EXPECT_EQ(s.micro_batch_ids(), 10);
  EXPECT_EQ(s.chunk_ids(), 3);
}

// Each refusal leaves the schedule as it was.
void ExpectRefused(Schedule& s, TaskId begin, TaskId end, const std::vector<DeviceId>& to_device,
                   const std::vector<std::int32_t>& to_group) {
  const size_t size = s.size();
  const auto order = s.Order(2, streams::kCompute);
  EXPECT_FALSE(s.AppendCopies(begin, end, to_device, to_group, [](Task&) {}));
  EXPECT_EQ(s.size(), size);
  EXPECT_EQ(s.Order(2, streams::kCompute), order);
}

TEST(AppendCopies, RefusesWhatItCannotCopyWhole) {
  Schedule s(6);
  AddPair(s, 0, 1, 0, 0);
  const std::int32_t g = s.Group({2, 3});
  // An unmapped device, an unmapped group, a target that is a source.
  ExpectRefused(s, 0, 5, {2, -1, -1, -1}, {g});
  ExpectRefused(s, 0, 5, {2, 3, -1, -1}, {-1});
  ExpectRefused(s, 0, 5, {1, 2, -1, -1}, {g});
  // Two sources on one target.
  ExpectRefused(s, 0, 5, {2, 2, -1, -1}, {g});
  // A dependency before the part (the kernel's on the collective, part [2, 5)).
  ExpectRefused(s, 2, 5, {2, 3, -1, -1}, {g});
  // A receive whose send lies outside the part ([3, 5): the receive and the kernel).
  ExpectRefused(s, 3, 4, {2, 3, -1, -1}, {g});
  // A target device that already has tasks.
  Task busy;
  busy.device = 3;
  s.Add(busy, {});
  ExpectRefused(s, 0, 5, {2, 3, -1, -1}, {g});
  // A source device with a task outside the part (one more on device 0, after it).
  Task later;
  later.device = 0;
  s.Add(later, {});
  const std::int32_t g45 = s.Group({4, 5});
  ExpectRefused(s, 0, 5, {4, 5, -1, -1}, {g45});
  // Out of range.
  ExpectRefused(s, 4, 99, {4, 5, -1, -1}, {g45});
}

// The part as checked for one copy serves the next copies of the same part, until what it
// found may have changed: each case copies once, changes the schedule, and must be refused
// as a first copy would be.
TEST(AppendCopies, ChecksThePartAgainWhenItMayHaveChanged) {
  struct Case {
    const char* what;
    std::function<void(Schedule&)> change;
    bool copies;
  };
  const std::vector<Case> cases = {
      {"unchanged: the next copy goes through", [](Schedule&) {}, true},
      {"a dependency of a task of the part on one outside it", [](Schedule& s) { s.AddDep(1, 7); }, false},
      {"a receive of the part paired with a send outside it", [](Schedule& s) { s.Link(3, 7); }, false},
      {"a task after the part on one of its devices' streams",
       [](Schedule& s) {
         Task later;
         later.device = 0;
         s.Add(later, {});
       },
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Schedule s(8);
    AddPair(s, 0, 1, 0, 0);
    std::vector<std::int32_t> first(s.groups().size(), -1);
    first[0] = s.Group({3, 2});
    ASSERT_TRUE(s.AppendCopies(0, 5, std::vector<DeviceId>{3, 2, -1, -1, -1, -1, -1, -1}, first, [](Task&) {}));
    std::vector<std::int32_t> groups(s.groups().size() + 1, -1);
    groups[0] = s.Group({5, 4});
    c.change(s);
    const std::vector<DeviceId> next = {5, 4, -1, -1, -1, -1, -1, -1};
    if (c.copies) {
      EXPECT_TRUE(s.AppendCopies(0, 5, next, groups, [](Task&) {}));
      EXPECT_EQ(s.size(), 15u);
    } else {
      ExpectRefused(s, 0, 5, next, groups);
    }
  }
}

}  // namespace
}  // namespace testbed
