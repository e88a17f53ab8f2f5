// The simulator's pending events, earliest first, by (time, creation order): a radix heap.
// Event times never lie before the last event taken (the clock only moves forward), so each
// event sits in the bucket of the highest bit in which its time differs from the last taken
// one (times are non-negative doubles, whose bit patterns order as their values). A push is
// an append; a take pops bucket 0 (the events at the last time, in creation order) or, when
// it is empty, empties the lowest non-empty bucket into lower ones around its earliest
// event. Each event moves down a few buckets in its life instead of sifting through a heap at
// every push and take, whose comparisons the processor cannot predict. Every event has its own
// creation number and ties in time keep it (a bucket receives events of one time in creation
// order), so the order is total and the same as any priority queue's. A push earlier than the
// last take (not made by the engine) is still placed right, by rebuilding the buckets.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace testbed::sim {

template <typename Event>
class EventQueue {
 public:
  [[nodiscard]] bool empty() const noexcept { return head_ == buckets_[0].size() && mask_ == 0; }

  // Takes the earliest event out (the queue must not be empty).
  [[nodiscard]] Event take() {
    if (head_ == buckets_[0].size()) Refill();
    return buckets_[0][head_++];
  }

  void push(const Event& e) {
    const std::uint64_t k = Key(e);
    if (k < last_) {
      Rebuild(k);
    }
    Place(e, k);
  }

 private:
  // The bits of a non-negative time (with -0 as 0), ordered as the times.
  [[nodiscard]] static std::uint64_t Key(const Event& e) noexcept { return std::bit_cast<std::uint64_t>(e.time + 0.0); }
  [[nodiscard]] int BucketOf(std::uint64_t k) const noexcept {
    return k == last_ ? 0 : 64 - std::countl_zero(k ^ last_);
  }
  void Place(const Event& e, std::uint64_t k) {
    const int b = BucketOf(k);
    buckets_[static_cast<size_t>(b)].push_back(e);
    if (b > 0) mask_ |= std::uint64_t{1} << (b - 1);
  }

  // Bucket 0 is spent: the lowest non-empty bucket's earliest time becomes the last, and its
  // events move to the buckets they belong in now (those of that time to bucket 0, in order).
  void Refill() {
    buckets_[0].clear();
    head_ = 0;
    const int b = std::countr_zero(mask_) + 1;
    std::vector<Event>& from = buckets_[static_cast<size_t>(b)];
    std::uint64_t least = Key(from.front());
    for (const Event& e : from) least = std::min(least, Key(e));
    last_ = least;
    mask_ &= ~(std::uint64_t{1} << (b - 1));
    for (const Event& e : from) Place(e, Key(e));
    from.clear();
  }

  // A push before the last take: every pending event is placed again around `k`, in creation
  // order so that each bucket keeps ties in it.
  void Rebuild(std::uint64_t k) {
    std::vector<Event> all(buckets_[0].begin() + static_cast<std::ptrdiff_t>(head_), buckets_[0].end());
    for (size_t b = 1; b < buckets_.size(); ++b) {
      all.insert(all.end(), buckets_[b].begin(), buckets_[b].end());
      buckets_[b].clear();
    }
    std::sort(all.begin(), all.end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });
    buckets_[0].clear();
    head_ = 0;
    mask_ = 0;
    last_ = k;
    for (const Event& e : all) Place(e, Key(e));
  }

  std::array<std::vector<Event>, 65> buckets_;
  std::size_t head_ = 0;        // bucket 0's next event
  std::uint64_t mask_ = 0;      // bit b - 1: bucket b (1..64) holds events
  std::uint64_t last_ = 0;      // key of the last time taken
};

}  // namespace testbed::sim
