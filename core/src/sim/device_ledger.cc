#include "sim/device_ledger.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace testbed::sim {

DeviceLedger::DeviceLedger(const Schedule& s, int micro_batches, int chunks, bool share_gangs) {
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
  // Each device's books are owned by its smallest group of two or more consecutive members
  // (the first such group of that size), where no other group owns any of them.
  owns_.assign(s.groups().size(), 0);
  gang_size_.assign(devices, 0);
  waiting_.assign(devices, Waiting{});
  if (!share_gangs) return;
  std::vector<size_t> runs;
  for (size_t g = 0; g < s.groups().size(); ++g) {
    if (run_first_[g] >= 0 && s.groups()[g].size() >= 2) runs.push_back(g);
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [&](size_t x, size_t y) { return s.groups()[x].size() < s.groups()[y].size(); });
  std::vector<std::uint8_t> owned(devices, 0);
  for (size_t g : runs) {
    const size_t a = static_cast<size_t>(run_first_[g]), e = a + s.groups()[g].size();
    if (std::any_of(owned.begin() + static_cast<std::ptrdiff_t>(a), owned.begin() + static_cast<std::ptrdiff_t>(e),
                    [](std::uint8_t o) { return o != 0; })) {
      continue;
    }
    std::fill(owned.begin() + static_cast<std::ptrdiff_t>(a), owned.begin() + static_cast<std::ptrdiff_t>(e), 1);
    owns_[g] = 1;
    gang_size_[a] = static_cast<std::int32_t>(e - a);
  }
}

bool DeviceLedger::Same(const Book& a, const Book& b) noexcept {
  // Every field but `lead`, bit for bit (no padding compared).
  constexpr size_t kInts = offsetof(Book, lead);
  constexpr size_t kFrom = offsetof(Book, last_change);
  constexpr size_t kTo = offsetof(Book, stats) + offsetof(SimDeviceStats, max_micro_batches_held) + sizeof(int);
  static_assert(kInts == 3 * sizeof(int) && kFrom == offsetof(Book, lead) + sizeof(std::int32_t));
  static_assert(offsetof(Book, stats) == offsetof(Book, mem_now) + sizeof(double));
  static_assert(offsetof(SimDeviceStats, max_micro_batches_held) == 6 * sizeof(double),
                "every field of SimDeviceStats but the last is a double: compared as bytes");
  return std::memcmp(&a, &b, kInts) == 0 &&
         std::memcmp(reinterpret_cast<const char*>(&a) + kFrom, reinterpret_cast<const char*>(&b) + kFrom,
                     kTo - kFrom) == 0;
}

void DeviceLedger::Split(std::int32_t lead) noexcept {
  const size_t a = static_cast<size_t>(lead), e = a + static_cast<size_t>(gang_size_[a]);
  books_[a].lead = -1;
  for (size_t d = a + 1; d < e; ++d) books_[d] = books_[a];
  Waiting& w = waiting_[a];
  for (size_t d = a; d < e && w.members != 0; ++d) {
    if ((w.members >> (d - a) & 1) != 0) CommOn(books_[d], w.delta, w.now);
  }
  w.members = 0;
}

void DeviceLedger::ChangeOne(Hold hold, size_t row, size_t d) {
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
}

void DeviceLedger::Change(Hold hold, std::int32_t where) {
  const size_t devices = books_.size();
  const size_t row = static_cast<size_t>(hold.key) * devices;
  if (held_.size() < row + devices) held_.resize(row + devices, 0);
  if (where < 0 && where != kNowhere) {
    const size_t g = static_cast<size_t>(-(where + 1));
    const size_t a = static_cast<size_t>(run_first_[g]);
    if (owns_[g] && SharedNow(a)) {
      // A shared book changes for all members alike only where every member's count for
      // this key would change its book alike (the counts themselves are kept per member).
      const size_t e = a + (*groups_)[g].size();
      const auto moves = [&](size_t d) {
        const int count = held_[row + d];
        return hold.delta > 0 ? count == 0 : count - hold.layers <= 0;
      };
      const bool first = moves(a);
      bool alike = true;
      for (size_t d = a + 1; d < e && alike; ++d) alike = moves(d) == first;
      if (alike) {
        // Every member's count moves; the first member's book stands for all.
        for (size_t d = e; d-- > a + 1;) {
          int& count = held_[row + d];
          count = hold.delta > 0 ? count + hold.layers : std::max(0, count - hold.layers);
        }
        ChangeOne(hold, row, a);
        return;
      }
      Split(books_[a].lead);
    }
  }
  ForDevices(where, [&](size_t d) {
    if (books_[d].lead >= 0) Split(books_[d].lead);
    ChangeOne(hold, row, d);
  });
}

std::vector<SimDeviceStats> DeviceLedger::Finish(double now) {
  std::vector<SimDeviceStats> stats;
  stats.reserve(books_.size());
  for (Book& b : books_) {
    if (b.lead >= 0) Split(b.lead);
    Account(b, now);
    stats.push_back(b.stats);
  }
  return stats;
}

}  // namespace testbed::sim
