// Schedule::AppendCopies: a self-contained part of a schedule added again on other devices in
// one pass (the expander's copies of identical data-parallel replicas), with each device's
// stream lists copied whole instead of appended to task by task.
#include <algorithm>

#include "huge_pages.h"
#include "testbed/schedule.h"

namespace testbed {

bool Schedule::AppendCopies(TaskId begin, TaskId end, std::span<const DeviceId> to_device,
                            std::span<const std::int32_t> to_group, absl::FunctionRef<void(Task&)> edit) {
  if (begin < 0 || end < begin || static_cast<size_t>(end) > tasks_.size()) return false;
  Compact();
  const TaskId offset = static_cast<TaskId>(tasks_.size()) - begin;
  // The devices the part uses, each mapped to a device of its own that has no tasks yet.
  std::vector<char> used(order_.size(), 0);
  auto use = [&](DeviceId d) {
    if (d < 0 || static_cast<size_t>(d) >= order_.size() || static_cast<size_t>(d) >= to_device.size()) return false;
    const DeviceId to = to_device[static_cast<size_t>(d)];
    if (to < 0 || static_cast<size_t>(to) >= order_.size()) return false;
    used[static_cast<size_t>(d)] = 1;
    return true;
  };
  size_t dep_count = 0;
  for (TaskId t = begin; t < end; ++t) {
    const Task& task = tasks_[static_cast<size_t>(t)];
    if (task.device >= 0 && !use(task.device)) return false;
    if (task.peer >= 0 && !use(task.peer)) return false;
    if (task.device < 0 && task.group >= 0) {
      if (static_cast<size_t>(task.group) >= groups_.size() || static_cast<size_t>(task.group) >= to_group.size() ||
          to_group[static_cast<size_t>(task.group)] < 0 ||
          static_cast<size_t>(to_group[static_cast<size_t>(task.group)]) >= groups_.size()) {
        return false;
      }
      for (DeviceId d : groups_[static_cast<size_t>(task.group)]) {
        if (!use(d)) return false;
      }
    }
    if (task.match >= 0 && (task.match < begin || task.match >= end)) return false;
    const size_t i = static_cast<size_t>(t);
    for (std::int64_t k = dep_begin_[i]; k < dep_begin_[i + 1]; ++k) {
      if (deps_[static_cast<size_t>(k)] < begin || deps_[static_cast<size_t>(k)] >= end) return false;
    }
    dep_count += static_cast<size_t>(dep_begin_[i + 1] - dep_begin_[i]);
  }
  std::vector<char> target(order_.size(), 0);
  for (size_t d = 0; d < used.size(); ++d) {
    if (!used[d]) continue;
    for (const std::vector<TaskId>& stream : order_[d]) {
      if (!stream.empty() && (stream.front() < begin || stream.back() >= end)) return false;
    }
    const size_t to = static_cast<size_t>(to_device[d]);
    if (target[to] || used[to]) return false;
    target[to] = 1;
    for (const std::vector<TaskId>& stream : order_[to]) {
      if (!stream.empty()) return false;
    }
  }

  const size_t n = static_cast<size_t>(end - begin);
  GrowHuge(tasks_, n);
  GrowHuge(dep_begin_, n);
  GrowHuge(deps_, dep_count);
  for (TaskId t = begin; t < end; ++t) {
    Task c = tasks_[static_cast<size_t>(t)];
    if (c.device >= 0) c.device = to_device[static_cast<size_t>(c.device)];
    if (c.peer >= 0) c.peer = to_device[static_cast<size_t>(c.peer)];
    if (c.device < 0 && c.group >= 0) c.group = to_group[static_cast<size_t>(c.group)];
    if (c.match >= 0) c.match += offset;
    edit(c);
    iterations_ = std::max(iterations_, c.iteration + 1);
    streams_used_ = std::max(streams_used_, static_cast<int>(c.stream) + 1);
    tasks_.push_back(c);
    const size_t i = static_cast<size_t>(t);
    for (std::int64_t k = dep_begin_[i]; k < dep_begin_[i + 1]; ++k) deps_.push_back(deps_[static_cast<size_t>(k)] + offset);
    dep_begin_.push_back(static_cast<std::int64_t>(deps_.size()));
  }
  // Stream lists: a device's tasks of the part are all its tasks, in order, so its copy's
  // lists are its own, moved.
  for (size_t d = 0; d < used.size(); ++d) {
    if (!used[d]) continue;
    const std::vector<std::vector<TaskId>>& from = order_[d];
    std::vector<std::vector<TaskId>>& to = order_[static_cast<size_t>(to_device[d])];
    to.resize(from.size());
    for (size_t st = 0; st < from.size(); ++st) {
      to[st].resize(from[st].size());
      std::transform(from[st].begin(), from[st].end(), to[st].begin(), [offset](TaskId t) { return t + offset; });
    }
  }
  return true;
}

}  // namespace testbed
