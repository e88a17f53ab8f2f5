// The simulator's stream order, found in task order while its task records are made: each
// task arrives once at the head of each of its streams, and a task b after a on a stream
// arrives there when a finishes (the edge a -> b). Stream lists are in task order (a device's
// tasks are added in the order it runs them), so the task before b on each of its streams is
// the last one seen there, and every edge is found without walking the lists, whose tasks lie
// far apart in the records.
//
// The edges are those of a walk over the lists, device by device and stream by stream, that
// makes one edge for a's successor on a device unless it is the one a's last edge went to:
// a gang's or collective's members usually have the same successor, one after another, and
// those make one edge (one arrival), which starts it at the same point among the same events
// as several would. A task whose successors differ (a collective over several gangs: a few in
// a thousand) has its edges made again, in that walk's order, at the end.
//
// Records is the engine's vector of task records, each with `wait` (arrivals still missing),
// `succ` (the first stream successor, -1: none) and `flags`, where Record::kHasMore marks
// further successors, listed in `more` (by task, in order).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "testbed/schedule.h"

namespace testbed::sim {

template <typename Records>
class StreamEdges {
 public:
  StreamEdges(const Schedule& s, Records& records)
      : s_(s),
        records_(records),
        streams_(static_cast<size_t>(std::max(s.streams_used(), 0))),
        tails_(static_cast<size_t>(std::max(s.num_devices(), 0)) * streams_, TaskId{-1}) {}

  // Task t, whose record exists and counts its dependencies in `wait`, in task order.
  void Add(TaskId t, const Task& task) {
    const size_t st = task.stream;
    if (task.device >= 0) {
      Visit(static_cast<size_t>(task.device) * streams_ + st, t);
    } else if (task.group >= 0 && static_cast<size_t>(task.group) < s_.groups().size()) {
      for (DeviceId d : s_.groups()[static_cast<size_t>(task.group)]) Visit(static_cast<size_t>(d) * streams_ + st, t);
    }
  }

  // After the last task: the edges of tasks whose successors differ, made again in the walk's
  // order; their further successors into `more`.
  void Finish(std::vector<std::pair<TaskId, TaskId>>& more) {
    std::sort(tangled_.begin(), tangled_.end());
    std::vector<DeviceId> devices;
    for (TaskId a : tangled_) {
      auto& ra = records_[static_cast<size_t>(a)];
      --records_[static_cast<size_t>(ra.succ)].wait;  // its first edge, counted as found
      ra.succ = -1;
      ra.flags &= static_cast<decltype(ra.flags)>(~Record::kHasMore);
      const std::span<const DeviceId> of = s_.DevicesOf(a);
      devices.assign(of.begin(), of.end());
      std::sort(devices.begin(), devices.end());
      devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
      const int stream = s_.task(a).stream;
      TaskId last = -1;
      for (DeviceId d : devices) {
        const std::vector<TaskId>& order = s_.Order(d, stream);
        const auto [lo, hi] = std::equal_range(order.begin(), order.end(), a);
        for (auto k = lo; k != hi && k + 1 != order.end(); ++k) {
          const TaskId b = *(k + 1);
          if (b == last) continue;
          last = b;
          ++records_[static_cast<size_t>(b)].wait;
          if (ra.succ < 0) {
            ra.succ = b;
          } else {
            ra.flags |= Record::kHasMore;
            more.emplace_back(a, b);
          }
        }
      }
    }
  }

 private:
  using Record = typename Records::value_type;

  // Task b on one of its streams (a device's): it arrives at the head, or after the task
  // before it there.
  void Visit(size_t list, TaskId b) {
    const TaskId a = tails_[list];
    tails_[list] = b;
    if (a < 0) {
      ++records_[static_cast<size_t>(b)].wait;
      return;
    }
    auto& ra = records_[static_cast<size_t>(a)];
    if (ra.succ < 0) {
      ra.succ = b;
      ++records_[static_cast<size_t>(b)].wait;
    } else if (ra.succ != b && (ra.flags & Record::kHasMore) == 0) {
      ra.flags |= Record::kHasMore;  // a mark until Finish
      tangled_.push_back(a);
    }
  }

  const Schedule& s_;
  Records& records_;
  size_t streams_;
  std::vector<TaskId> tails_;    // [device * streams + stream] -> the last task seen there
  std::vector<TaskId> tangled_;  // tasks whose stream successors differ
};

}  // namespace testbed::sim
