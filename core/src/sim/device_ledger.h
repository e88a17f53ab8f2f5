// Per-device books of a simulation: how each device's time splits into compute, exposed
// communication and idle; its memory now and at its peak; and how many micro-batches hold
// activations on it. The engine tells it when work starts and ends on a device.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/simulator.h"
#include "testbed/schedule.h"

namespace testbed::sim {

class DeviceLedger {
 public:
  // Every device starts with its static memory (weights, gradients, optimizer state).
  explicit DeviceLedger(const Schedule& schedule);

  // Compute (or a kernel) starts on `dev`, adding `bytes` of memory; a forward compute
  // task's (chunk, micro-batch) holds activations from then on.
  void StartCompute(const Task& task, DeviceId dev, double bytes, double now);
  // It ends, changing memory by `bytes` (negative: freed); a backward compute task
  // releases its (chunk, micro-batch).
  void EndCompute(const Task& task, DeviceId dev, double bytes, double now);
  void StartComm(DeviceId dev, double now);
  void EndComm(DeviceId dev, double now);

  // Closes every device's books at `now`.
  [[nodiscard]] std::vector<SimDeviceStats> Finish(double now);

 private:
  // Splits the time since the device's last change into compute / exposed comm / idle.
  void Account(size_t d, double now) noexcept;
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
