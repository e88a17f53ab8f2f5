// Per-device books of a simulation: how each device's time splits into compute, exposed
// communication and idle; its memory now and at its peak; and how many micro-batches hold
// activations on it. The engine tells it when work starts and ends on a device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "sim/simulator.h"
#include "testbed/schedule.h"

namespace testbed::sim {

class DeviceLedger {
 public:
  // Every device starts with its static memory (weights, gradients, optimizer state).
  // `micro_batches` and `chunks`: more than any task's Task::micro_batch and Task::chunk.
  // The schedule's groups are read when a task on a group starts or ends: the schedule
  // must outlive the ledger.
  // `share_gangs`: a gang whose members' books are equal keeps one book for all of them
  // while only its own tasks change them (below); false keeps every member's book apart
  // (the reference the sharing is tested against: the same doubles).
  DeviceLedger(const Schedule& schedule, int micro_batches, int chunks, bool share_gangs = true);
  DeviceLedger() = default;

  // Where a task runs: its device (>= 0), its group g as -(g + 1), or kNowhere (no device).
  static constexpr std::int32_t kNowhere = std::numeric_limits<std::int32_t>::min();

  // What a compute task does to the micro-batches holding activations on its devices: a
  // forward (delta +1) adds its layers to its (iteration, chunk, micro-batch), a backward
  // (delta -1) takes its layers away; every other task leaves them (delta 0).
  struct Hold {
    std::uint32_t key = 0;
    std::int32_t layers = 0;
    std::int8_t delta = 0;
  };
  // A task's Hold (none for a compute task outside any micro-batch); nullopt when its key
  // does not fit 32 bits (iterations x chunks x micro-batches past 2^32).
  [[nodiscard]] std::optional<Hold> HoldOf(const Task& task) const noexcept {
    if (task.kind != TaskKind::kCompute || task.phase == Phase::kRecompute || task.micro_batch < 0) return Hold{};
    const size_t key = (static_cast<size_t>(task.iteration) * held_chunks_ + static_cast<size_t>(task.chunk)) *
                           held_key_stride_ +
                       static_cast<size_t>(task.micro_batch);
    if (key > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
    return Hold{static_cast<std::uint32_t>(key), task.end_layer - task.first_layer,
                static_cast<std::int8_t>(task.phase == Phase::kForward ? 1 : -1)};
  }

  // Compute (or a kernel) starts at `where` (one device, or a gang's members), adding `bytes`
  // of memory on each; a forward compute task's (chunk, micro-batch) holds activations from
  // then on.
  void StartCompute(std::int32_t where, double bytes, Hold hold, double now) {
    ForBooks(where, [&](Book& b) {
      Account(b, now);
      ++b.computing;
      b.mem_now += bytes;
      b.stats.memory_peak_bytes = std::max(b.stats.memory_peak_bytes, b.mem_now);
    });
    if (hold.delta > 0) Change(hold, where);
  }
  // It ends, changing memory by `bytes` (negative: freed) on each; a backward compute task
  // releases its (chunk, micro-batch).
  void EndCompute(std::int32_t where, double bytes, Hold hold, double now) {
    ForBooks(where, [&](Book& b) {
      Account(b, now);
      --b.computing;
      b.mem_now += bytes;
    });
    if (hold.delta < 0) Change(hold, where);
  }
  // Communication starts (`delta` +1) or ends (-1) at `where`.
  void Comm(std::int32_t where, int delta, double now) {
    if (where >= 0) {
      const std::int32_t lead = books_[static_cast<size_t>(where)].lead;
      if (lead >= 0 && Defer(lead, where, delta, now)) return;
    }
    ForBooks(where, [&](Book& b) { CommOn(b, delta, now); });
  }

  // How many gangs share one book now (the sharing below; for tests).
  [[nodiscard]] int SharedGangs() const noexcept {
    int n = 0;
    for (size_t d = 0; d < books_.size(); ++d) n += books_[d].lead == static_cast<std::int32_t>(d) ? 1 : 0;
    return n;
  }

  // Closes every device's books at `now`.
  [[nodiscard]] std::vector<SimDeviceStats> Finish(double now);

 private:
  // One device's books, together (each event touches one cache line or two per device).
  struct Book {
    int computing = 0, communicating = 0;
    int held_now = 0;  // micro-batches with activations alive
    // While its gang shares one book: the first member's device (whose book holds the
    // gang's, the others' being stale); else -1.
    std::int32_t lead = -1;
    double last_change = 0, mem_now = 0;
    SimDeviceStats stats;
  };
  // Splits the time since the device's last change into compute / exposed comm / idle.
  static void Account(Book& b, double now) noexcept {
    const double dt = now - b.last_change;
    if (dt > 0) {
      if (b.computing > 0) {
        b.stats.compute_s += dt;
      } else if (b.communicating > 0) {
        b.stats.exposed_comm_s += dt;
      } else {
        b.stats.idle_s += dt;
      }
      if (b.communicating > 0) b.stats.comm_s += dt;
    }
    b.last_change = now;
  }
  static void CommOn(Book& b, int delta, double now) noexcept {
    Account(b, now);
    b.communicating += delta;
  }
  void Change(Hold hold, std::int32_t where);
  void ChangeOne(Hold hold, size_t row, size_t d);

  // Gangs sharing one book. A group of consecutive members (a tensor-parallel gang) may own
  // its members' books (each device is owned by one group at most, the smallest). When an
  // event of the gang finds every member's book equal (every field, bit for bit), the gang's
  // events from then on change the first member's book alone; the first event of anything
  // else on a member copies that book back to every member first (Split). An event changes
  // equal books alike, so the books are the ones kept apart would hold.
  [[nodiscard]] static bool Same(const Book& a, const Book& b) noexcept;
  // Copies a shared book back to every member of its gang (first member `lead`), and
  // applies the change its members have waiting (Defer) to theirs.
  void Split(std::int32_t lead) noexcept;

  // A shared gang's members each sending or receiving on their own (a point-to-point
  // transfer per tensor-parallel rank) at the same time: a member's communication starting
  // or ending waits while each member it has not reached yet makes the same change at the same
  // time, and when every member has, changes the shared book once. Anything else first
  // splits the book, giving the members that made it their change. False where it cannot
  // wait (the member already has one waiting, or another change waits); at most 64 members.
  struct Waiting {
    std::uint64_t members = 0;  // bit k: member k (device lead + k) has made it
    double now = 0;
    int delta = 0;
  };
  bool Defer(std::int32_t lead, std::int32_t device, int delta, double now) noexcept {
    const size_t a = static_cast<size_t>(lead);
    const std::int32_t size = gang_size_[a];
    if (size > 64) return false;
    Waiting& w = waiting_[a];
    const std::uint64_t bit = std::uint64_t{1} << static_cast<unsigned>(device - lead);
    if (w.members == 0) {
      w = Waiting{bit, now, delta};
    } else if ((w.members & bit) == 0 && w.now == now && w.delta == delta) {
      w.members |= bit;
    } else {
      return false;
    }
    const std::uint64_t all = size == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << static_cast<unsigned>(size)) - 1;
    if (w.members == all) {
      CommOn(books_[a], delta, now);
      w.members = 0;
    }
    return true;
  }

  // Calls `f(device index)` for each device of `where`: a group of consecutive members as
  // one walk over adjacent books.
  template <typename F>
  void ForDevices(std::int32_t where, F&& f) {
    if (where >= 0) {
      f(static_cast<size_t>(where));
      return;
    }
    if (where == kNowhere) return;
    const size_t g = static_cast<size_t>(-(where + 1));
    const std::vector<DeviceId>& members = (*groups_)[g];
    if (run_first_[g] >= 0) {
      const size_t a = static_cast<size_t>(run_first_[g]);
      for (size_t d = a, e = a + members.size(); d < e; ++d) f(d);
      return;
    }
    for (DeviceId d : members) f(static_cast<size_t>(d));
  }
  // Whether owning gang g (first member a) shares its book with no change waiting; a waiting
  // change splits it first.
  [[nodiscard]] bool SharedNow(size_t a) noexcept {
    if (books_[a].lead < 0) return false;
    if (waiting_[a].members == 0) return true;
    Split(books_[a].lead);
    return false;
  }

  // Calls `f(book)` for each device of `where`, with books shared and split as above.
  template <typename F>
  void ForBooks(std::int32_t where, F&& f) {
    if (where >= 0) {
      Book& b = books_[static_cast<size_t>(where)];
      if (b.lead >= 0) Split(b.lead);
      f(b);
      return;
    }
    if (where == kNowhere) return;
    const size_t g = static_cast<size_t>(-(where + 1));
    if (owns_[g]) {
      const size_t a = static_cast<size_t>(run_first_[g]);
      Book& first = books_[a];
      if (SharedNow(a)) {  // the gang's own event
        f(first);
        return;
      }
      const size_t e = a + (*groups_)[g].size();
      for (size_t d = a; d < e; ++d) f(books_[d]);
      for (size_t d = a + 1; d < e; ++d) {
        if (!Same(first, books_[d])) return;
      }
      for (size_t d = a; d < e; ++d) books_[d].lead = static_cast<std::int32_t>(a);
      return;
    }
    ForDevices(where, [&](size_t d) {
      Book& b = books_[d];
      if (b.lead >= 0) Split(b.lead);
      f(b);
    });
  }

  std::vector<Book> books_;
  // The schedule's groups, and per group its first member where its members are
  // consecutive ascending device ids (else -1).
  const std::vector<std::vector<DeviceId>>* groups_ = nullptr;
  std::vector<DeviceId> run_first_;
  // Per group: whether it owns its members' books (sharing above); per device that is a
  // sharing gang's first member, the gang's size.
  std::vector<std::uint8_t> owns_;
  std::vector<std::int32_t> gang_size_;
  std::vector<Waiting> waiting_;  // per sharing gang's first member
  // Layers with activations alive per (iteration, chunk, micro-batch) key and device, at
  // held_[key * devices + device] (a gang's members side by side; devices: books_.size()),
  // grown by whole keys: a key counts on a device from its first forward task until its last
  // backward task ends.
  std::vector<int> held_;
  size_t held_key_stride_ = 1;
  size_t held_chunks_ = 1;
};

}  // namespace testbed::sim
