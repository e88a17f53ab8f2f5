// Large arrays that are filled once and then read at random (a schedule's tasks, the
// simulator's per-task records) are faulted in one 4 KiB page at a time, unless the kernel is
// asked for transparent huge pages for them: where the kernel's setting is "madvise" (the
// default of many distributions), a million-task schedule otherwise spends about a tenth of
// its building and simulation in page faults. These helpers ask for huge pages on the 2 MiB
// aligned part of a fresh allocation before it is first written; elsewhere (not Linux, or
// huge pages off) they do nothing but reserve.
#pragma once

#include <cstddef>
#include <iterator>
#include <vector>

#include "testbed/kept_blocks.h"

namespace testbed {

// Asks for huge pages over the 2 MiB-aligned part of [data, data + bytes), if it holds any.
void AdviseHugePages(const void* data, std::size_t bytes) noexcept;

// v.reserve(n), with huge pages asked for over a new buffer before anything is written there:
// the elements move into it after the advice (a plain reserve would copy them first, and
// fault in their part of the buffer in small pages).
template <typename T, typename A>
void ReserveHuge(std::vector<T, A>& v, std::size_t n) {
  if (n <= v.capacity()) return;
  std::vector<T, A> fresh;
  fresh.reserve(n);
  AdviseHugePages(fresh.data(), fresh.capacity() * sizeof(T));
  fresh.insert(fresh.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  v.swap(fresh);
  // The old buffer goes back to the kernel, not to the kept blocks (testbed/kept_blocks.h).
  DropGivenBlocks drop;
  std::vector<T, A>().swap(fresh);
}

// Room for `extra` more elements (a vector filled by appending). Past 64 Ki elements a full
// vector grows fourfold instead of twofold: a large one is copied and faulted in a third as
// often, and the room it does not fill is address space never touched.
template <typename T, typename A>
void GrowHuge(std::vector<T, A>& v, std::size_t extra) {
  if (v.size() + extra <= v.capacity()) return;
  const std::size_t factor = v.capacity() >= (std::size_t{1} << 16) ? 4 : 2;
  const std::size_t grown = v.capacity() * factor;
  ReserveHuge(v, v.size() + extra > grown ? v.size() + extra : grown);
}

// v.assign(n, value) into a buffer that had huge pages asked for before it was filled.
template <typename T, typename A>
void AssignHuge(std::vector<T, A>& v, std::size_t n, const T& value) {
  if (n > v.capacity()) {
    {
      DropGivenBlocks drop;  // as ReserveHuge's old buffer
      std::vector<T, A>().swap(v);
    }
    ReserveHuge(v, n);
  }
  v.assign(n, value);
}

}  // namespace testbed
