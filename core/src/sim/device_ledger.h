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
  DeviceLedger(const Schedule& schedule, int micro_batches, int chunks);
  DeviceLedger() = default;

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

  // Compute (or a kernel) starts on `devs` (one device, or a gang's members), adding `bytes`
  // of memory on each; a forward compute task's (chunk, micro-batch) holds activations from
  // then on.
  void StartCompute(std::span<const DeviceId> devs, double bytes, Hold hold, double now) {
    for (DeviceId dev : devs) {
      Book& b = books_[static_cast<size_t>(dev)];
      Account(b, now);
      ++b.computing;
      b.mem_now += bytes;
      b.stats.memory_peak_bytes = std::max(b.stats.memory_peak_bytes, b.mem_now);
    }
    if (hold.delta > 0) Change(hold, devs);
  }
  // It ends, changing memory by `bytes` (negative: freed) on each; a backward compute task
  // releases its (chunk, micro-batch).
  void EndCompute(std::span<const DeviceId> devs, double bytes, Hold hold, double now) {
    for (DeviceId dev : devs) {
      Book& b = books_[static_cast<size_t>(dev)];
      Account(b, now);
      --b.computing;
      b.mem_now += bytes;
    }
    if (hold.delta < 0) Change(hold, devs);
  }
  void StartComm(DeviceId dev, double now) {
    Book& b = books_[static_cast<size_t>(dev)];
    Account(b, now);
    ++b.communicating;
  }
  void EndComm(DeviceId dev, double now) {
    Book& b = books_[static_cast<size_t>(dev)];
    Account(b, now);
    --b.communicating;
  }

  // Closes every device's books at `now`.
  [[nodiscard]] std::vector<SimDeviceStats> Finish(double now);

 private:
  // One device's books, together (each event touches one cache line or two per device).
  struct Book {
    int computing = 0, communicating = 0;
    int held_now = 0;  // micro-batches with activations alive
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
  void Change(Hold hold, std::span<const DeviceId> devs);

  std::vector<Book> books_;
  // Layers with activations alive per (iteration, chunk, micro-batch) key and device, at
  // held_[key * devices + device] (a gang's members side by side; devices: books_.size()),
  // grown by whole keys: a key counts on a device from its first forward task until its last
  // backward task ends.
  std::vector<int> held_;
  size_t held_key_stride_ = 1;
  size_t held_chunks_ = 1;
};

}  // namespace testbed::sim
