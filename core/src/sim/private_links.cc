#include "sim/private_links.h"

#include <algorithm>
#include <iterator>

namespace testbed::sim {

void PrivateLinks::Add(const CommPlan& plan, std::uint8_t stream, std::span<const DeviceId> devices,
                       std::uint8_t recv_stream, std::span<const DeviceId> recv_devices) {
  if (plan.phases.empty()) return;
  const auto streams = static_cast<std::uint16_t>(stream << 8 | recv_stream);
  const std::uintptr_t key = reinterpret_cast<std::uintptr_t>(&plan) ^ (std::uintptr_t{streams} << 4);
  Seen& slot = seen_[(key * 0x9E3779B97F4A7C15ULL) >> (64 - kSeenBits)];
  if (slot.plan == &plan && slot.streams == streams) return;
  slot = Seen{&plan, streams};
  mine_.clear();
  for (DeviceId d : devices) mine_.push_back(Owner{d, stream});
  for (DeviceId d : recv_devices) mine_.push_back(Owner{d, recv_stream});
  std::sort(mine_.begin(), mine_.end());
  const bool too_many = mine_.size() > kMostOwners;
  for (const CommPhase& ph : plan.phases) {
    for (const auto& [link, bytes] : ph.link_bytes) {
      const size_t l = static_cast<size_t>(link);
      if (l >= state_.size() || state_[l] == kShared) continue;
      std::vector<Owner>& o = owners_[l];
      if (state_[l] == kUnseen && !too_many) {
        o = mine_;
        state_[l] = kPrivate;
        continue;
      }
      kept_.clear();
      if (!too_many) std::set_intersection(o.begin(), o.end(), mine_.begin(), mine_.end(), std::back_inserter(kept_));
      o.swap(kept_);
      if (o.empty()) {
        state_[l] = kShared;
        std::vector<Owner>().swap(o);
      }
    }
  }
}

std::vector<char> PrivateLinks::Take() {
  std::vector<char> result(state_.size(), 0);
  for (size_t l = 0; l < state_.size(); ++l) result[l] = state_[l] == kPrivate ? 1 : 0;
  return result;
}

}  // namespace testbed::sim
