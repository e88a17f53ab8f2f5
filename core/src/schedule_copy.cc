// Schedule::AppendCopies: a self-contained part of a schedule added again on other devices in
// one pass (the expander's copies of identical data-parallel replicas), with each device's
// stream lists copied whole instead of appended to task by task.
#include <algorithm>

#include "huge_pages.h"
#include "testbed/schedule.h"

namespace testbed {

// What a part is, for its copies: the (device, stream) lists its tasks fill, the devices
// it sends to, the groups its gangs and collectives run on, its dependency count. False
// where it is not a part AppendCopies can copy whatever the devices it goes to.
bool Schedule::CheckCopyPart(TaskId begin, TaskId end, CopyPart& part) const {
  part = CopyPart{};
  auto use = [&](DeviceId d, TaskId t, std::uint8_t stream) {
    if (d < 0 || static_cast<size_t>(d) >= order_.size()) return false;
    const auto& streams = order_[static_cast<size_t>(d)];
    if (stream >= streams.size() || streams[stream].empty()) return false;
    const std::vector<TaskId>& from = streams[stream];
    if (from.front() != t) return from.front() >= begin;  // a later task of a list seen (or one begun before)
    if (from.back() >= end) return false;  // the device has tasks after the part
    part.lists.push_back({d, stream});
    return true;
  };
  for (TaskId t = begin; t < end; ++t) {
    const Task& task = tasks_[static_cast<size_t>(t)];
    if (task.device >= 0 && !use(task.device, t, task.stream)) return false;
    if (task.peer >= 0) part.peers.push_back(task.peer);
    if (task.device < 0 && task.group >= 0) {
      if (static_cast<size_t>(task.group) >= groups_.size()) return false;
      if (part.groups.empty() || part.groups.back() != task.group) part.groups.push_back(task.group);
      for (DeviceId d : groups_[static_cast<size_t>(task.group)]) {
        if (!use(d, t, task.stream)) return false;
      }
    }
    if (task.match >= 0 && (task.match < begin || task.match >= end)) return false;
    const size_t i = static_cast<size_t>(t);
    for (std::int64_t k = dep_begin_[i]; k < dep_begin_[i + 1]; ++k) {
      if (deps_[static_cast<size_t>(k)] < begin || deps_[static_cast<size_t>(k)] >= end) return false;
    }
    part.dep_count += static_cast<size_t>(dep_begin_[i + 1] - dep_begin_[i]);
  }
  for (std::vector<std::int32_t>* v : {&part.peers, &part.groups}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  part.begin = begin;
  part.end = end;
  part.edits = edits_;
  return true;
}

bool Schedule::AppendCopies(TaskId begin, TaskId end, std::span<const DeviceId> to_device,
                            std::span<const std::int32_t> to_group, absl::FunctionRef<void(Task&)> edit) {
  if (begin < 0 || end < begin || static_cast<size_t>(end) > tasks_.size()) return false;
  Compact();
  const TaskId offset = static_cast<TaskId>(tasks_.size()) - begin;
  // The part as checked for the last copy serves again (the expander copies one replica
  // many times) while no dependency or match changed and no task joined its lists since.
  CopyPart& part = copy_part_;
  const bool same = part.begin == begin && part.end == end && part.edits == edits_ &&
                    std::all_of(part.lists.begin(), part.lists.end(), [&](const CopyPart::List& l) {
                      return order_[static_cast<size_t>(l.device)][l.stream].back() < end;
                    });
  if (!same && !CheckCopyPart(begin, end, part)) {
    part = CopyPart{};
    return false;
  }
  // Where this copy goes: every device, peer and group the part uses mapped, onto lists that
  // are empty and distinct.
  auto mapped = [&](DeviceId d) {
    if (static_cast<size_t>(d) >= to_device.size()) return false;
    const DeviceId to = to_device[static_cast<size_t>(d)];
    return to >= 0 && static_cast<size_t>(to) < order_.size();
  };
  for (DeviceId d : part.peers) {
    if (static_cast<size_t>(d) >= to_device.size() || to_device[static_cast<size_t>(d)] < 0) return false;
  }
  for (std::int32_t g : part.groups) {
    if (static_cast<size_t>(g) >= to_group.size() || to_group[static_cast<size_t>(g)] < 0 ||
        static_cast<size_t>(to_group[static_cast<size_t>(g)]) >= groups_.size()) {
      return false;
    }
  }
  struct List {
    DeviceId from, to;
    std::uint8_t stream;
  };
  std::vector<List> lists;
  lists.reserve(part.lists.size());
  for (const CopyPart::List& l : part.lists) {
    if (!mapped(l.device)) return false;
    const DeviceId to = to_device[static_cast<size_t>(l.device)];
    const auto& streams = order_[static_cast<size_t>(to)];
    if (l.stream < streams.size() && !streams[l.stream].empty()) return false;
    lists.push_back({l.device, to, l.stream});
  }
  std::sort(lists.begin(), lists.end(), [](const List& a, const List& b) {
    return a.to != b.to ? a.to < b.to : a.stream < b.stream;
  });
  for (size_t k = 1; k < lists.size(); ++k) {
    if (lists[k].to == lists[k - 1].to && lists[k].stream == lists[k - 1].stream) return false;
  }
  const size_t dep_count = part.dep_count;

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
  }
  // The part's dependencies are one run of deps_ (Compact above): copied whole, moved.
  const size_t deps_from = static_cast<size_t>(dep_begin_[static_cast<size_t>(begin)]);
  const size_t deps_at = deps_.size();
  deps_.resize(deps_at + dep_count);
  {
    const TaskId* from = deps_.data() + deps_from;
    TaskId* to = deps_.data() + deps_at;
    for (size_t k = 0; k < dep_count; ++k) to[k] = from[k] + offset;
  }
  const size_t begins_at = dep_begin_.size();
  dep_begin_.resize(begins_at + n);
  {
    const std::int64_t shift = static_cast<std::int64_t>(deps_at) - static_cast<std::int64_t>(deps_from);
    const std::int64_t* from = dep_begin_.data() + begin + 1;
    std::int64_t* to = dep_begin_.data() + begins_at;
    for (size_t k = 0; k < n; ++k) to[k] = from[k] + shift;
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
