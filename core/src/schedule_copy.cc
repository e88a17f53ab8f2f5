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
  // The (device, stream) lists the part's tasks join, each found at its first task, with the
  // list of the copy: work in proportion to the part, not to the schedule or the cluster.
  struct List {
    DeviceId from, to;
    std::uint8_t stream;
  };
  std::vector<List> lists;
  auto use = [&](DeviceId d, TaskId t, std::uint8_t stream) {
    if (d < 0 || static_cast<size_t>(d) >= order_.size() || static_cast<size_t>(d) >= to_device.size()) return false;
    const DeviceId to = to_device[static_cast<size_t>(d)];
    if (to < 0 || static_cast<size_t>(to) >= order_.size()) return false;
    const std::vector<TaskId>& from = order_[static_cast<size_t>(d)][stream];
    if (from.front() != t) return from.front() >= begin;  // a later task of a list seen (or one begun before)
    if (from.back() >= end) return false;  // the device has tasks after the part
    lists.push_back({d, to, stream});
    return true;
  };
  size_t dep_count = 0;
  for (TaskId t = begin; t < end; ++t) {
    const Task& task = tasks_[static_cast<size_t>(t)];
    if (task.device >= 0 && !use(task.device, t, task.stream)) return false;
    if (task.peer >= 0 && (task.peer >= static_cast<DeviceId>(to_device.size()) || to_device[static_cast<size_t>(task.peer)] < 0)) {
      return false;
    }
    if (task.device < 0 && task.group >= 0) {
      if (static_cast<size_t>(task.group) >= groups_.size() || static_cast<size_t>(task.group) >= to_group.size() ||
          to_group[static_cast<size_t>(task.group)] < 0 ||
          static_cast<size_t>(to_group[static_cast<size_t>(task.group)]) >= groups_.size()) {
        return false;
      }
      for (DeviceId d : groups_[static_cast<size_t>(task.group)]) {
        if (!use(d, t, task.stream)) return false;
      }
    }
    if (task.match >= 0 && (task.match < begin || task.match >= end)) return false;
    const size_t i = static_cast<size_t>(t);
    for (std::int64_t k = dep_begin_[i]; k < dep_begin_[i + 1]; ++k) {
      if (deps_[static_cast<size_t>(k)] < begin || deps_[static_cast<size_t>(k)] >= end) return false;
    }
    dep_count += static_cast<size_t>(dep_begin_[i + 1] - dep_begin_[i]);
  }
  // A copy's list that is not empty, or two lists that would become one: refused.
  for (const List& l : lists) {
    const auto& to = order_[static_cast<size_t>(l.to)];
    if (l.stream < to.size() && !to[l.stream].empty()) return false;
  }
  std::sort(lists.begin(), lists.end(), [](const List& a, const List& b) {
    return a.to != b.to ? a.to < b.to : a.stream < b.stream;
  });
  for (size_t k = 1; k < lists.size(); ++k) {
    if (lists[k].to == lists[k - 1].to && lists[k].stream == lists[k - 1].stream) return false;
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
    micro_batch_ids_ = std::max(micro_batch_ids_, c.micro_batch + 1);
    chunk_ids_ = std::max(chunk_ids_, c.chunk + 1);
    streams_used_ = std::max(streams_used_, static_cast<int>(c.stream) + 1);
    tasks_.push_back(c);
    const size_t i = static_cast<size_t>(t);
    for (std::int64_t k = dep_begin_[i]; k < dep_begin_[i + 1]; ++k) deps_.push_back(deps_[static_cast<size_t>(k)] + offset);
    dep_begin_.push_back(static_cast<std::int64_t>(deps_.size()));
  }
  // Stream lists: a device's tasks of the part are all its tasks on the stream, in order, so
  // the copy's list is the source's, moved.
  for (const List& l : lists) {
    const std::vector<TaskId>& from = order_[static_cast<size_t>(l.from)][l.stream];
    std::vector<std::vector<TaskId>>& to = order_[static_cast<size_t>(l.to)];
    if (to.size() <= l.stream) to.resize(static_cast<size_t>(l.stream) + 1);
    to[l.stream].resize(from.size());
    std::transform(from.begin(), from.end(), to[l.stream].begin(), [offset](TaskId t) { return t + offset; });
  }
  return true;
}

}  // namespace testbed
