#include "sim/device_ledger.h"

#include <algorithm>

namespace testbed::sim {

DeviceLedger::DeviceLedger(const Schedule& s, int micro_batches, int chunks) {
  const size_t devices = static_cast<size_t>(s.num_devices());
  books_.assign(devices, Book{});
  held_key_stride_ = static_cast<size_t>(std::max(1, micro_batches));
  held_chunks_ = static_cast<size_t>(std::max(1, chunks));
  held_.clear();
  for (size_t d = 0; d < devices; ++d) {
    const double b = s.static_bytes(static_cast<DeviceId>(d));
    books_[d].stats.static_bytes = b;
    books_[d].mem_now = b;
    books_[d].stats.memory_peak_bytes = b;
  }
  groups_ = &s.groups();
  run_first_.assign(s.groups().size(), -1);
  for (size_t g = 0; g < s.groups().size(); ++g) {
    const std::vector<DeviceId>& m = s.groups()[g];
    bool run = !m.empty() && m.front() >= 0 && static_cast<size_t>(m.back()) < devices;
    for (size_t k = 1; k < m.size() && run; ++k) run = m[k] == m[k - 1] + 1;
    if (run) run_first_[g] = m.front();
  }
}

void DeviceLedger::Change(Hold hold, std::int32_t where) {
  const size_t devices = books_.size();
  const size_t row = static_cast<size_t>(hold.key) * devices;
  if (held_.size() < row + devices) held_.resize(row + devices, 0);
  ForDevices(where, [&](size_t d) {
    int& count = held_[row + d];
    Book& b = books_[d];
    if (hold.delta > 0) {
      if (count == 0) {
        ++b.held_now;
        b.stats.max_micro_batches_held = std::max(b.stats.max_micro_batches_held, b.held_now);
      }
      count += hold.layers;
    } else {
      count -= hold.layers;
      if (count <= 0) {
        count = 0;
        --b.held_now;
      }
    }
  });
}

std::vector<SimDeviceStats> DeviceLedger::Finish(double now) {
  std::vector<SimDeviceStats> stats;
  stats.reserve(books_.size());
  for (Book& b : books_) {
    Account(b, now);
    stats.push_back(b.stats);
  }
  return stats;
}

}  // namespace testbed::sim
