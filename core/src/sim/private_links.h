// Links no two transfers can ever hold at once, found before the engine runs (LinkSharing
// moves transfers that cross only such links without re-rating anyone: sim/link_sharing.h).
// A link is private when one (device, stream) order holds every communication task whose
// plan crosses it: that stream runs them one after another, and a transfer releases its
// links before its task completes, so each finds the link idle and gets its whole
// bandwidth. The tensor-parallel collectives of a gang inside one node (its NVLink ports)
// are the usual case.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "testbed/collective.h"
#include "testbed/schedule.h"

namespace testbed::sim {

class PrivateLinks {
 public:
  explicit PrivateLinks(size_t links) : state_(links, kUnseen), owners_(links), seen_(kSeenSlots) {}

  // A task whose transfers follow `plan` runs on `stream` of `devices`; for a send, its
  // receive runs on `recv_stream` of `recv_devices` (the transfer holds both streams).
  void Add(const CommPlan& plan, std::uint8_t stream, std::span<const DeviceId> devices,
           std::uint8_t recv_stream = kNoStream, std::span<const DeviceId> recv_devices = {});

  // One entry per link: 1 where private (a link no task crosses is not).
  [[nodiscard]] std::vector<char> Take();

  static constexpr std::uint8_t kNoStream = 0xFF;

 private:
  struct Owner {
    DeviceId device;
    std::uint8_t stream;
    friend bool operator==(const Owner&, const Owner&) = default;
    friend bool operator<(const Owner& a, const Owner& b) {
      return a.device != b.device ? a.device < b.device : a.stream < b.stream;
    }
  };
  enum : char { kUnseen, kPrivate, kShared };
  // A transfer over more devices than this marks its links shared without looking further:
  // always safe (the engine then shares them as any link), and it keeps the intersections
  // cheap on clusters of 100,000 devices.
  static constexpr size_t kMostOwners = 64;
  // Tasks of one plan on the same streams hold the same links from the same orders: a
  // direct-mapped table of combinations already looked at skips most repeats (looking at one
  // again is harmless, the intersections are idempotent).
  struct Seen {
    const CommPlan* plan = nullptr;
    std::uint16_t streams = 0;
  };
  static constexpr int kSeenBits = 14;
  static constexpr size_t kSeenSlots = size_t{1} << kSeenBits;

  std::vector<char> state_;
  std::vector<std::vector<Owner>> owners_;  // per link: the orders holding all its tasks so far
  std::vector<Seen> seen_;
  std::vector<Owner> mine_, kept_;
};

}  // namespace testbed::sim
