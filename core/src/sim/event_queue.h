// The simulator's pending events, earliest first: a 4-ary min-heap on (time, creation order).
// Every event has its own creation number, so the order is total and any heap pops the same
// sequence; four children per node halve the depth of a binary heap, and the sifts down from
// the root (one per event) are what the engine spends here. A take leaves the root open for
// the push that usually follows (take()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace testbed::sim {

template <typename Event>
class EventQueue {
 public:
  [[nodiscard]] bool empty() noexcept {
    Settle();
    return heap_.empty();
  }

  // Takes the earliest event out. The root slot it leaves stays open until the next push
  // fills it (one sift down, where a pop and a push would sift down and up) or the next
  // empty() or take() closes it with the last event, as a pop does. The heap holds the same
  // events either way, and the order is total, so the events come out in the same order.
  [[nodiscard]] Event take() noexcept {
    Settle();
    hole_ = true;
    return heap_.front();
  }

  void push(const Event& e) {
    if (hole_) {
      hole_ = false;
      SiftDown(e);
      return;
    }
    std::size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
      const std::size_t parent = (i - 1) / kArity;
      if (!Before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

 private:
  static constexpr std::size_t kArity = 4;

  // Closes an open root slot with the last event.
  void Settle() noexcept {
    if (!hole_) return;
    hole_ = false;
    const Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(last);
  }

  // Puts `e` in the root slot's place and moves it down to where it belongs.
  void SiftDown(const Event& e) noexcept {
    const std::size_t n = heap_.size();
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = kArity * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = first + kArity < n ? first + kArity : n;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (Before(heap_[c], heap_[best])) best = c;
      }
      if (!Before(heap_[best], e)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  [[nodiscard]] static bool Before(const Event& a, const Event& b) noexcept {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
  std::vector<Event> heap_;
  bool hole_ = false;  // heap_[0] was taken and is not yet filled
};

}  // namespace testbed::sim
