// Per-device books of a simulation: how each device's time splits into compute, exposed
// communication and idle; its memory now and at its peak; and how many micro-batches hold
// activations on it. The engine tells it when work starts and ends on a device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/simulator.h"
#include "testbed/schedule.h"

namespace testbed::sim {

class DeviceLedger {
 public:
  // Every device starts with its static memory (weights, gradients, optimizer state).
  // `micro_batches` and `chunks`: more than any task's Task::micro_batch and Task::chunk.
  DeviceLedger(const Schedule& schedule, int micro_batches, int chunks);
  DeviceLedger() = default;

  // Compute (or a kernel) starts on `dev`, adding `bytes` of memory; a forward compute
  // task's (chunk, micro-batch) holds activations from then on.
  void StartCompute(const Task& task, DeviceId dev, double bytes, double now) {
    const size_t d = static_cast<size_t>(dev);
    Account(d, now);
    ++computing_[d];
    mem_now_[d] += bytes;
    stats_[d].memory_peak_bytes = std::max(stats_[d].memory_peak_bytes, mem_now_[d]);
    if (task.kind == TaskKind::kCompute && task.phase == Phase::kForward) Hold(task, d, +1);
  }
  // It ends, changing memory by `bytes` (negative: freed); a backward compute task
  // releases its (chunk, micro-batch).
  void EndCompute(const Task& task, DeviceId dev, double bytes, double now) {
    const size_t d = static_cast<size_t>(dev);
    Account(d, now);
    --computing_[d];
    mem_now_[d] += bytes;
    if (task.kind == TaskKind::kCompute && task.phase == Phase::kBackward) Hold(task, d, -1);
  }
  void StartComm(DeviceId dev, double now) {
    Account(static_cast<size_t>(dev), now);
    ++communicating_[static_cast<size_t>(dev)];
  }
  void EndComm(DeviceId dev, double now) {
    Account(static_cast<size_t>(dev), now);
    --communicating_[static_cast<size_t>(dev)];
  }

  // Closes every device's books at `now`.
  [[nodiscard]] std::vector<SimDeviceStats> Finish(double now);

 private:
  // Splits the time since the device's last change into compute / exposed comm / idle.
  void Account(size_t i, double now) noexcept {
    const double dt = now - last_change_[i];
    if (dt > 0) {
      if (computing_[i] > 0) {
        stats_[i].compute_s += dt;
      } else if (communicating_[i] > 0) {
        stats_[i].exposed_comm_s += dt;
      } else {
        stats_[i].idle_s += dt;
      }
      if (communicating_[i] > 0) stats_[i].comm_s += dt;
    }
    last_change_[i] = now;
  }
  void Hold(const Task& task, size_t d, int delta);

  std::vector<int> computing_, communicating_;
  std::vector<double> last_change_, mem_now_;
  std::vector<SimDeviceStats> stats_;
  // Micro-batches with activations alive on a device: a (iteration, chunk, micro-batch)
  // counts from its first forward task until its last backward task ends.
  std::vector<std::vector<int>> held_;
  std::vector<int> held_now_;
  size_t held_key_stride_ = 1;
  size_t held_chunks_ = 1;
};

}  // namespace testbed::sim
