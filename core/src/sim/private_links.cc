#include "sim/private_links.h"

#include <algorithm>
#include <cstdint>
#include <utility>


namespace testbed::sim {
namespace {

struct Owner {
  DeviceId device;
  std::uint8_t stream;
  friend bool operator==(const Owner&, const Owner&) = default;
  friend bool operator<(const Owner& a, const Owner& b) {
    return a.device != b.device ? a.device < b.device : a.stream < b.stream;
  }
};

// A transfer over more devices than this marks its links shared without looking further:
// always safe (the engine then shares them as any link), and it keeps the intersections
// below cheap on clusters of 100,000 devices.
constexpr size_t kMostOwners = 64;

}  // namespace

std::vector<char> PrivateLinks(const Schedule& schedule, std::span<const CommPlan* const> comm, size_t links,
                               absl::FunctionRef<TaskId(TaskId)> receive_of) {
  enum : char { kUnseen, kPrivate, kShared };
  std::vector<char> state(links, kUnseen);
  std::vector<std::vector<Owner>> owners(links);  // the (device, stream) orders holding all its tasks so far
  // Tasks of one plan on the same streams hold the same links from the same orders: a
  // direct-mapped table of combinations already looked at skips most repeats (looking at
  // one again is harmless, the intersections are idempotent).
  struct Seen {
    const CommPlan* plan = nullptr;
    std::uint16_t streams = 0;
  };
  constexpr size_t kSeenSlots = size_t{1} << 14;
  std::vector<Seen> seen(kSeenSlots);
  std::vector<Owner> mine, kept;
  for (size_t i = 0; i < comm.size(); ++i) {
    const CommPlan* plan = comm[i];
    if (plan == nullptr || plan->phases.empty()) continue;
    const TaskId t = static_cast<TaskId>(i);
    const Task& task = schedule.task(t);
    const TaskId recv = task.kind == TaskKind::kSend ? receive_of(t) : -1;
    const std::uint8_t recv_stream = recv >= 0 ? schedule.task(recv).stream : 0xFF;
    const auto streams = static_cast<std::uint16_t>(task.stream << 8 | recv_stream);
    const std::uintptr_t key = reinterpret_cast<std::uintptr_t>(plan) ^ (std::uintptr_t{streams} << 4);
    Seen& slot = seen[(key * 0x9E3779B97F4A7C15ULL) >> (64 - 14)];
    if (slot.plan == plan && slot.streams == streams) continue;
    slot = Seen{plan, streams};
    mine.clear();
    for (DeviceId d : schedule.DevicesOf(t)) mine.push_back(Owner{d, task.stream});
    if (recv >= 0) {
      for (DeviceId d : schedule.DevicesOf(recv)) mine.push_back(Owner{d, recv_stream});
    }
    std::sort(mine.begin(), mine.end());
    const bool too_many = mine.size() > kMostOwners;
    for (const CommPhase& ph : plan->phases) {
      for (const auto& [link, bytes] : ph.link_bytes) {
        const size_t l = static_cast<size_t>(link);
        if (l >= links || state[l] == kShared) continue;
        std::vector<Owner>& o = owners[l];
        if (state[l] == kUnseen && !too_many) {
          o = mine;
          state[l] = kPrivate;
          continue;
        }
        kept.clear();
        if (!too_many) std::set_intersection(o.begin(), o.end(), mine.begin(), mine.end(), std::back_inserter(kept));
        o.swap(kept);
        if (o.empty()) {
          state[l] = kShared;
          std::vector<Owner>().swap(o);
        }
      }
    }
  }
  std::vector<char> result(links, 0);
  for (size_t l = 0; l < links; ++l) result[l] = state[l] == kPrivate ? 1 : 0;
  return result;
}

}  // namespace testbed::sim
