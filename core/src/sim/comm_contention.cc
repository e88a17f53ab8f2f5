#include "sim/comm_contention.h"

#include <algorithm>

namespace testbed::sim {

void CommContention::Reset(int devices, std::size_t tasks, double slowdown) {
  slowdown_ = slowdown;
  if (!on()) return;
  comm_.assign(static_cast<std::size_t>(devices), 0);
  running_.assign(static_cast<std::size_t>(devices), {});
  where_.assign(tasks, {});
  left_.assign(tasks, 0.0);
  since_.assign(tasks, 0.0);
  rate_.assign(tasks, 1.0);
  version_.assign(tasks, 0);
}

double CommContention::RateOf(TaskId t) const {
  for (DeviceId d : where_[static_cast<std::size_t>(t)]) {
    if (comm_[static_cast<std::size_t>(d)] > 0) return 1.0 - slowdown_;
  }
  return 1.0;
}

double CommContention::StartSlowed(TaskId t, std::span<const DeviceId> devices, double seconds, double now) {
  const std::size_t i = static_cast<std::size_t>(t);
  where_[i].assign(devices.begin(), devices.end());
  for (DeviceId d : devices) running_[static_cast<std::size_t>(d)].push_back(t);
  left_[i] = seconds;
  since_[i] = now;
  rate_[i] = RateOf(t);
  return now + seconds / rate_[i];
}

void CommContention::EndSlowed(TaskId t, std::span<const DeviceId> devices) {
  for (DeviceId d : devices) {
    auto& list = running_[static_cast<std::size_t>(d)];
    list.erase(std::find(list.begin(), list.end(), t));
  }
  where_[static_cast<std::size_t>(t)].clear();
}

}  // namespace testbed::sim
