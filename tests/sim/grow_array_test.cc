// GrowArray (testbed/grow_array.h), the schedule's task and dependency storage: what it
// holds survives growth from a small malloc'd buffer to its own mapping and from one mapping
// to a larger one, copies and moves, and equals a std::vector given the same appends.
#include "testbed/grow_array.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "testbed/schedule.h"

namespace testbed {
namespace {

TEST(GrowArray, HoldsWhatAVectorHoldsAcrossEveryGrowth) {
  // 3 Mi int64 (24 MiB): past the 2 MiB where buffers become mappings, and through several
  // remaps after that; appended one at a time and in runs, as the schedule does.
  GrowArray<std::int64_t> a;
  std::vector<std::int64_t> v;
  std::uint64_t x = 12345;
  for (int i = 0; i < (3 << 20); ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto value = static_cast<std::int64_t>(x >> 7);
    if (i % 5 == 0) {
      const std::int64_t run[3] = {value, value + 1, value + 2};
      a.append(run);
      v.insert(v.end(), run, run + 3);
    } else {
      a.push_back(value);
      v.push_back(value);
    }
  }
  ASSERT_EQ(a.size(), v.size());
  EXPECT_GE(a.capacity(), a.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), v.begin()));

  GrowArray<std::int64_t> copy(a);
  ASSERT_EQ(copy.size(), v.size());
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), v.begin()));
  EXPECT_NE(copy.data(), a.data());

  GrowArray<std::int64_t> moved(std::move(a));
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): a moved-from array is empty
  EXPECT_TRUE(std::equal(moved.begin(), moved.end(), v.begin()));
  copy = moved;  // a large buffer replaced by another
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), v.begin()));
}

TEST(GrowArray, AssignFillsAndReplacesSmallAndLarge) {
  GrowArray<std::int32_t> a = {1, 2, 3};
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[2], 3);
  a.assign(5, 7);  // larger than its room: a fresh buffer
  EXPECT_EQ(a.size(), 5u);
  for (std::int32_t v : a) EXPECT_EQ(v, 7);
  a.assign(1 << 20, -1);  // 4 MiB: a mapping of its own
  EXPECT_EQ(a.size(), size_t{1} << 20);
  EXPECT_EQ(a[0], -1);
  EXPECT_EQ(a[(1 << 20) - 1], -1);
  a.push_back(9);
  EXPECT_EQ(a.back(), 9);
  a.assign(2, 4);  // within its room: the buffer stays
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1], 4);
}

TEST(GrowArray, AScheduleOfMoreTasksThanOneMappingHoldsKeepsEveryTaskAndDependency) {
  // 40,000 tasks (88 bytes each, 3.4 MB): the task array grows past 2 MiB into a mapping.
  Schedule s(2);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    Task t;
    t.device = i % 2;
    t.micro_batch = i;
    t.bytes = 3 * static_cast<std::int64_t>(i);
    if (i >= 2) {
      (void)s.Add(t, {i - 1, i - 2});
    } else {
      (void)s.Add(t, {});
    }
  }
  ASSERT_EQ(s.size(), static_cast<size_t>(n));
  Schedule copy = s;
  for (int i = 0; i < n; i += 997) {
    EXPECT_EQ(copy.task(i).micro_batch, i);
    EXPECT_EQ(copy.task(i).bytes, 3 * static_cast<std::int64_t>(i));
    const auto deps = copy.deps(i);
    if (i >= 2) {
      ASSERT_EQ(deps.size(), 2u);
      EXPECT_EQ(deps[0], i - 1);
      EXPECT_EQ(deps[1], i - 2);
    } else {
      EXPECT_TRUE(deps.empty());
    }
  }
  EXPECT_EQ(copy.Order(0, copy.task(0).stream).size(), static_cast<size_t>(n / 2));
  EXPECT_EQ(copy.tasks().size(), static_cast<size_t>(n));
}

}  // namespace
}  // namespace testbed
