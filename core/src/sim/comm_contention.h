// Communication slowing the compute it overlaps (SimOptions::comm_compute_slowdown). NCCL's
// kernels run on the same GPU as the GEMMs they overlap: they hold streaming multiprocessors
// and memory bandwidth, so a compute task runs at 1 - slowdown of its speed while any
// communication involving its device runs, and at full speed otherwise. This tracks, per
// device, the communication running on it and the compute tasks running on it, and the
// remaining work of each compute task, so that its finish moves when its rate changes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "testbed/schedule.h"

namespace testbed::sim {

class CommContention {
 public:
  // `slowdown` in [0, 1): 0 turns the model off (nothing is allocated, and every call below
  // returns at once: StartCompute with the full-speed finish).
  void Reset(int devices, std::size_t tasks, double slowdown);
  [[nodiscard]] bool on() const noexcept { return slowdown_ > 0; }

  // A compute task of `seconds` at full speed starts now on `devices`: its finish time. Both
  // are inline where the model is off (the engine calls them for every compute task).
  [[nodiscard]] double StartCompute(TaskId t, std::span<const DeviceId> devices, double seconds, double now) {
    return on() ? StartSlowed(t, devices, seconds, now) : now + seconds;
  }
  void EndCompute(TaskId t, std::span<const DeviceId> devices) {
    if (on()) EndSlowed(t, devices);
  }

  // Communication starts (+1) or ends (-1) on device `d`. Where that changes whether the
  // device communicates, each compute task running on it gets its new finish time through
  // `reschedule(task, finish, version)`; events of an older version are stale (Current).
  template <typename F>
  void CommChanged(DeviceId d, int delta, double now, F&& reschedule) {
    if (!on()) return;
    int& active = comm_[static_cast<std::size_t>(d)];
    const bool before = active > 0;
    active += delta;
    if (before == (active > 0)) return;
    for (TaskId t : running_[static_cast<std::size_t>(d)]) {
      const std::size_t i = static_cast<std::size_t>(t);
      left_[i] = std::max(0.0, left_[i] - (now - since_[i]) * rate_[i]);
      since_[i] = now;
      rate_[i] = RateOf(t);
      reschedule(t, now + left_[i] / rate_[i], ++version_[i]);
    }
  }

  [[nodiscard]] bool Current(TaskId t, std::uint32_t version) const noexcept {
    return !on() || version_[static_cast<std::size_t>(t)] == version;
  }
  [[nodiscard]] std::uint32_t version(TaskId t) const noexcept { return on() ? version_[static_cast<std::size_t>(t)] : 0; }

 private:
  double StartSlowed(TaskId t, std::span<const DeviceId> devices, double seconds, double now);
  void EndSlowed(TaskId t, std::span<const DeviceId> devices);
  // 1 - slowdown when any device of the task communicates, else 1.
  [[nodiscard]] double RateOf(TaskId t) const;

  double slowdown_ = 0;
  std::vector<int> comm_;                     // per device: communication tasks running
  std::vector<std::vector<TaskId>> running_;  // per device: compute tasks running
  std::vector<std::vector<DeviceId>> where_;  // per running compute task: its devices
  std::vector<double> left_, since_, rate_;   // per task: full-speed seconds left, since when, rate
  std::vector<std::uint32_t> version_;
};

}  // namespace testbed::sim
