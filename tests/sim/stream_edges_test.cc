// The simulator's stream edges, found in task order (sim/stream_edges.h), against the walk
// over every device's stream lists that they replace: for random schedules of single-device
// tasks, gangs and collectives on overlapping groups (so that a task's successors differ
// from device to device, and come back after another), every task's arrival count, first
// stream successor and further successors, in order, are the walk's.
#include "sim/stream_edges.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "testbed/schedule.h"

namespace testbed::sim {
namespace {

struct Record {
  static constexpr std::uint8_t kHasMore = 2;
  std::int32_t wait = 0;
  TaskId succ = -1;
  std::uint8_t flags = 0;
};

struct Edges {
  std::vector<Record> records;
  std::vector<std::pair<TaskId, TaskId>> more;
};

// The reference: each (device, stream) list in turn, devices outermost; b after a makes an
// edge unless a's last edge went to b; the head of every list arrives once.
Edges Walk(const Schedule& s) {
  Edges e;
  e.records.resize(s.size());
  for (TaskId t = 0; t < static_cast<TaskId>(s.size()); ++t) {
    e.records[static_cast<size_t>(t)].wait = static_cast<std::int32_t>(s.deps(t).size());
  }
  std::vector<TaskId> last(s.size(), -1);
  for (DeviceId d = 0; d < s.num_devices(); ++d) {
    for (int st = 0; st < s.streams_used(); ++st) {
      const std::vector<TaskId>& order = s.Order(d, st);
      for (size_t k = 0; k < order.size(); ++k) {
        const TaskId b = order[k];
        if (k == 0) {
          ++e.records[static_cast<size_t>(b)].wait;
          continue;
        }
        const TaskId a = order[k - 1];
        if (last[static_cast<size_t>(a)] == b) continue;
        last[static_cast<size_t>(a)] = b;
        ++e.records[static_cast<size_t>(b)].wait;
        Record& ra = e.records[static_cast<size_t>(a)];
        if (ra.succ < 0) {
          ra.succ = b;
        } else {
          ra.flags |= Record::kHasMore;
          e.more.emplace_back(a, b);
        }
      }
    }
  }
  std::stable_sort(e.more.begin(), e.more.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  return e;
}

Edges InTaskOrder(const Schedule& s) {
  Edges e;
  e.records.reserve(s.size());
  StreamEdges<std::vector<Record>> edges(s, e.records);
  for (TaskId t = 0; t < static_cast<TaskId>(s.size()); ++t) {
    Record& r = e.records.emplace_back();
    r.wait = static_cast<std::int32_t>(s.deps(t).size());
    edges.Add(t, s.task(t));
  }
  edges.Finish(e.more);
  return e;
}

void ExpectSame(const Edges& got, const Edges& want) {
  ASSERT_EQ(got.records.size(), want.records.size());
  for (size_t t = 0; t < want.records.size(); ++t) {
    EXPECT_EQ(got.records[t].wait, want.records[t].wait) << "task " << t;
    EXPECT_EQ(got.records[t].succ, want.records[t].succ) << "task " << t;
    EXPECT_EQ(got.records[t].flags, want.records[t].flags) << "task " << t;
  }
  EXPECT_EQ(got.more, want.more);
}

// A collective over devices 0-2 followed by a gang over {0, 2} and a task on device 1: its
// successors by device are b, c, b, which the walk makes three edges (b twice).
TEST(StreamEdges, ASuccessorThatComesBackAfterAnotherIsAnEdgeAgain) {
  Schedule s(3);
  const std::int32_t all = s.Group({0, 1, 2}), ends = s.Group({0, 2});
  Task coll;
  coll.kind = TaskKind::kCollective;
  coll.stream = 1;
  coll.group = all;
  const TaskId a = s.Add(coll, {});
  Task gang;
  gang.stream = 1;
  gang.group = ends;
  const TaskId b = s.Add(gang, {});
  Task one;
  one.stream = 1;
  one.device = 1;
  const TaskId c = s.Add(one, {});
  const Edges got = InTaskOrder(s);
  ExpectSame(got, Walk(s));
  EXPECT_EQ(got.records[static_cast<size_t>(a)].succ, b);
  EXPECT_EQ(got.more, (std::vector<std::pair<TaskId, TaskId>>{{a, c}, {a, b}}));
  EXPECT_EQ(got.records[static_cast<size_t>(a)].wait, 3);  // the head of three lists
  EXPECT_EQ(got.records[static_cast<size_t>(b)].wait, 2);  // two edges from a
  EXPECT_EQ(got.records[static_cast<size_t>(c)].wait, 1);
}

TEST(StreamEdges, RandomSchedulesGiveTheWalksEdges) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int devices = 1 + static_cast<int>(rng() % 6);
    const int streams = 1 + static_cast<int>(rng() % 3);
    Schedule s(devices);
    std::vector<std::int32_t> groups;
    for (int g = 0; g < 4; ++g) {
      std::vector<DeviceId> members;
      for (DeviceId d = 0; d < devices; ++d) {
        if (rng() % 2 == 0) members.push_back(d);
      }
      if (members.empty()) members.push_back(static_cast<DeviceId>(rng() % static_cast<unsigned>(devices)));
      std::shuffle(members.begin(), members.end(), rng);  // members in any order
      groups.push_back(s.Group(members));
    }
    const int tasks = 1 + static_cast<int>(rng() % 60);
    for (int k = 0; k < tasks; ++k) {
      Task t;
      t.stream = static_cast<std::uint8_t>(rng() % static_cast<unsigned>(streams));
      if (rng() % 3 == 0) {
        t.device = static_cast<DeviceId>(rng() % static_cast<unsigned>(devices));
      } else {
        t.kind = rng() % 2 == 0 ? TaskKind::kCollective : TaskKind::kCompute;
        t.group = groups[rng() % groups.size()];
      }
      std::vector<TaskId> deps;
      if (k > 0 && rng() % 2 == 0) deps.push_back(static_cast<TaskId>(rng() % static_cast<unsigned>(k)));
      s.Add(t, deps);
    }
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    ExpectSame(InTaskOrder(s), Walk(s));
  }
}

}  // namespace
}  // namespace testbed::sim
