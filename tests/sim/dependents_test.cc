// Each task's dependents, found in task order (sim/dependents.h), against the pass over
// every task's dependencies in id order that they replace: for random dependency lists with
// dependencies on later tasks and repeated ones, every task with one dependent holds it, and
// every task with several lists them all, in the pass's order.
#include "sim/dependents.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace testbed::sim {
namespace {

struct Record {
  static constexpr std::uint8_t kOneNext = 32, kManyNext = 64;
  std::int32_t next = 0;
  std::uint8_t flags = 0;
};

// The reference: per task, the tasks listing it, in the order a pass over every task's
// dependencies in id order meets them.
std::vector<std::vector<TaskId>> Listed(const std::vector<std::vector<TaskId>>& deps) {
  std::vector<std::vector<TaskId>> of(deps.size());
  for (TaskId t = 0; t < static_cast<TaskId>(deps.size()); ++t) {
    for (TaskId d : deps[static_cast<size_t>(t)]) of[static_cast<size_t>(d)].push_back(t);
  }
  return of;
}

// What the engine reads of task d's dependents.
std::vector<TaskId> Found(const std::vector<Record>& records, const std::vector<std::int32_t>& many,
                          const std::vector<TaskId>& list, TaskId d) {
  const Record& r = records[static_cast<size_t>(d)];
  if ((r.flags & Record::kOneNext) != 0) {
    EXPECT_EQ(r.flags & Record::kManyNext, 0) << "task " << d;
    return {r.next};
  }
  if ((r.flags & Record::kManyNext) == 0) return {};
  const size_t row = static_cast<size_t>(r.next);
  EXPECT_LT(row + 1, many.size()) << "task " << d;
  return {list.begin() + many[row], list.begin() + many[row + 1]};
}

void ExpectSame(const std::vector<std::vector<TaskId>>& deps) {
  std::vector<Record> records;
  records.reserve(deps.size());
  Dependents<std::vector<Record>> dependents(records);
  for (TaskId t = 0; t < static_cast<TaskId>(deps.size()); ++t) {
    records.emplace_back();
    dependents.Add(t, deps[static_cast<size_t>(t)]);
  }
  std::vector<std::int32_t> many;
  std::vector<TaskId> list;
  dependents.Finish(many, list);
  const std::vector<std::vector<TaskId>> want = Listed(deps);
  size_t several = 0;
  for (TaskId d = 0; d < static_cast<TaskId>(deps.size()); ++d) {
    EXPECT_EQ(Found(records, many, list, d), want[static_cast<size_t>(d)]) << "task " << d;
    several += want[static_cast<size_t>(d)].size() > 1 ? 1 : 0;
  }
  EXPECT_EQ(many.size(), several + 1);
}

TEST(Dependents, OneInTheRecordSeveralInRowsLaterTasksFirst) {
  // 0 <- 1, 2 (several, both after it); 3 <- 0 and 1 (on a later task, then one after it:
  // 0 and 1 list 3 before 4); 4 <- 3; 5 alone; 2 <- 2 (itself).
  ExpectSame({{3}, {0, 3}, {0, 2}, {}, {3}, {}});
  // A first dependent after the task, then one before it (on a later task): the earlier comes
  // first.
  ExpectSame({{2}, {}, {}, {2}});
  // Several on a later task only, one listed twice.
  ExpectSame({{3}, {3, 3}, {3}, {}});
}

TEST(Dependents, RandomListsMatchThePassInIdOrder) {
  std::mt19937 rng(20261207);
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + static_cast<int>(rng() % 60);
    std::vector<std::vector<TaskId>> deps(static_cast<size_t>(n));
    for (TaskId t = 0; t < n; ++t) {
      const int k = static_cast<int>(rng() % 4);
      for (int j = 0; j < k; ++j) {
        // Mostly recent earlier tasks; some later ones, some repeats.
        TaskId d;
        if (t > 0 && rng() % 4 != 0) {
          d = t - 1 - static_cast<TaskId>(rng() % std::min<unsigned>(static_cast<unsigned>(t), 6u));
        } else {
          d = static_cast<TaskId>(rng() % static_cast<unsigned>(n));
        }
        deps[static_cast<size_t>(t)].push_back(d);
      }
    }
    ExpectSame(deps);
  }
}

}  // namespace
}  // namespace testbed::sim
