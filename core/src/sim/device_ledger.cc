#include "sim/device_ledger.h"

#include <algorithm>

namespace testbed::sim {

DeviceLedger::DeviceLedger(const Schedule& s, int micro_batches, int chunks) {
  const size_t devices = static_cast<size_t>(s.num_devices());
  computing_.assign(devices, 0);
  communicating_.assign(devices, 0);
  last_change_.assign(devices, 0.0);
  stats_.assign(devices, SimDeviceStats{});
  mem_now_.assign(devices, 0.0);
  const int max_mb = micro_batches, max_chunk = chunks;
  held_key_stride_ = static_cast<size_t>(std::max(1, max_mb));
  held_chunks_ = static_cast<size_t>(std::max(1, max_chunk));
  held_.assign(devices, {});
  held_now_.assign(devices, 0);
  for (size_t d = 0; d < devices; ++d) {
    const double b = s.static_bytes(static_cast<DeviceId>(d));
    stats_[d].static_bytes = b;
    mem_now_[d] = b;
    stats_[d].memory_peak_bytes = b;
  }
}

void DeviceLedger::Hold(const Task& task, size_t d, int delta) {
  auto& live = held_[d];
  const size_t key = (static_cast<size_t>(task.iteration) * held_chunks_ + static_cast<size_t>(task.chunk)) *
                         held_key_stride_ +
                     static_cast<size_t>(task.micro_batch);
  if (live.size() <= key) live.resize(key + 1, 0);
  int& count = live[key];
  const int layers = task.end_layer - task.first_layer;
  if (delta > 0) {
    if (count == 0) {
      ++held_now_[d];
      stats_[d].max_micro_batches_held = std::max(stats_[d].max_micro_batches_held, held_now_[d]);
    }
    count += layers;
  } else {
    count -= layers;
    if (count <= 0) {
      count = 0;
      --held_now_[d];
    }
  }
}

std::vector<SimDeviceStats> DeviceLedger::Finish(double now) {
  for (size_t d = 0; d < stats_.size(); ++d) Account(d, now);
  return std::move(stats_);
}

}  // namespace testbed::sim
