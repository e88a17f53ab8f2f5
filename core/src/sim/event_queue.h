// The simulator's pending events, earliest first: a 4-ary min-heap on (time, creation order).
// Every event has its own creation number, so the order is total and any heap pops the same
// sequence; four children per node halve the depth of a binary heap, and the pops (one per
// event, each sifting down from the root) are what the engine spends here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace testbed::sim {

template <typename Event>
class EventQueue {
 public:
  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  [[nodiscard]] const Event& top() const noexcept { return heap_.front(); }

  void push(const Event& e) {
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

  void pop() {
    const Event last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return;
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = kArity * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = first + kArity < n ? first + kArity : n;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (Before(heap_[c], heap_[best])) best = c;
      }
      if (!Before(heap_[best], last)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
  }

 private:
  static constexpr std::size_t kArity = 4;
  [[nodiscard]] static bool Before(const Event& a, const Event& b) noexcept {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
  std::vector<Event> heap_;
};

}  // namespace testbed::sim
