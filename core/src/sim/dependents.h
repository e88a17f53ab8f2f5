// Each task's dependents (the tasks listing it among their dependencies), found in task order
// while the engine makes its records, without counting them in a pass of their own and
// listing them in another. A task with one dependent keeps it in its record; the few with
// several (a few in a hundred) get a row of a compressed list, their dependents in ascending
// id order, as a pass over every task's dependencies in id order would list them.
//
// A dependency on a later task (a task given one with Schedule::AddDep) is seen before that
// task's record exists: it is kept aside, and its dependents listed first in its row (they
// come before every dependent seen after the task, whose ids are larger).
//
// Records is the engine's vector of task records, each with `next` and `flags`, where
// Record::kOneNext marks one dependent (`next`) and Record::kManyNext several (`next`: its
// row, at [many[row], many[row + 1]) of the list). While the records are made, `next` of a
// task with several counts them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "testbed/schedule.h"

namespace testbed::sim {

template <typename Records>
class Dependents {
 public:
  explicit Dependents(Records& records) : records_(records) {}

  // Task t's dependencies, once its record exists, in task order.
  void Add(TaskId t, std::span<const TaskId> deps) {
    for (TaskId d : deps) {
      if (d < t) {
        Note(d, t, seen_);
      } else {
        later_.emplace_back(d, t);
      }
    }
  }

  // After the last task: the rows of tasks with several dependents, at [many[row],
  // many[row + 1]) of `list`.
  void Finish(std::vector<std::int32_t>& many, std::vector<TaskId>& list) {
    // Dependencies on later tasks, by the dependent's id: before every one seen in order.
    for (const auto& [d, t] : later_) Note(d, t, earlier_);
    many.clear();
    many.reserve(several_.size() + 1);
    std::int32_t listed = 0;
    for (TaskId d : several_) {
      auto& r = records_[static_cast<size_t>(d)];
      const std::int32_t count = r.next;
      r.next = static_cast<std::int32_t>(many.size());
      many.push_back(listed);
      listed += count;
    }
    many.push_back(listed);
    list.assign(static_cast<size_t>(listed), 0);
    std::vector<std::int32_t> fill(many.begin(), many.end() - 1);
    for (const auto* pairs : {&earlier_, &seen_}) {
      for (const auto& [d, t] : *pairs) {
        list[static_cast<size_t>(fill[static_cast<size_t>(records_[static_cast<size_t>(d)].next)]++)] = t;
      }
    }
  }

 private:
  using Record = typename Records::value_type;

  // t depends on d: d's first dependent lies in its record; at its second, both go to the
  // pairs (the first where it belongs: with those on a later task when its id is not above
  // d's); past that, each, to `pairs`.
  void Note(TaskId d, TaskId t, std::vector<std::pair<TaskId, TaskId>>& pairs) {
    auto& r = records_[static_cast<size_t>(d)];
    if ((r.flags & (Record::kOneNext | Record::kManyNext)) == 0) {
      r.flags |= Record::kOneNext;
      r.next = t;
      return;
    }
    if ((r.flags & Record::kOneNext) != 0) {
      r.flags ^= Record::kOneNext | Record::kManyNext;
      (r.next <= d ? earlier_ : seen_).emplace_back(d, r.next);
      r.next = 1;
      several_.push_back(d);
    }
    pairs.emplace_back(d, t);
    ++r.next;
  }

  Records& records_;
  // (task, dependent) of the tasks with several: found in order, and on later tasks.
  std::vector<std::pair<TaskId, TaskId>> seen_, earlier_;
  std::vector<std::pair<TaskId, TaskId>> later_;  // dependencies on later tasks, in task order
  std::vector<TaskId> several_;                    // tasks with several dependents
};

}  // namespace testbed::sim
