#include "huge_pages.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "testbed/grow_array.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace testbed {

void AdviseHugePages(const void* data, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (data == nullptr || last <= first) return;
  // Advice only: where it is refused (huge pages off), the pages stay small.
  (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

namespace {

// GrowArray's buffers from this size on are mappings of their own, in whole huge pages.
constexpr std::size_t kLarge = std::size_t{2} << 20;
[[nodiscard]] constexpr std::size_t Mapped(std::size_t bytes) noexcept { return (bytes + kLarge - 1) & ~(kLarge - 1); }

#if defined(__linux__)
// A 2 MiB-aligned range of `len` bytes (a multiple of 2 MiB), reserved and inaccessible.
[[nodiscard]] void* ReserveAligned(std::size_t len) {
  void* p = mmap(nullptr, len + kLarge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (begin + kLarge - 1) & ~(kLarge - 1);
  if (aligned > begin) (void)munmap(p, aligned - begin);
  const std::uintptr_t end = begin + len + kLarge;
  if (end > aligned + len) (void)munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
  return reinterpret_cast<void*>(aligned);
}
#endif

}  // namespace

void* detail::GrowBuffer(void* data, std::size_t old_bytes, std::size_t new_bytes) {
#if defined(__linux__)
  if (new_bytes >= kLarge) {
    const std::size_t len = Mapped(new_bytes);
    void* to = ReserveAligned(len);
    if (data != nullptr && old_bytes >= kLarge) {
      // Both ends 2 MiB-aligned: the page tables move with their huge pages whole, and the
      // mapping grows with the same protection and huge-page advice.
      void* moved = mremap(data, Mapped(old_bytes), len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
      if (moved == MAP_FAILED) {
        (void)munmap(to, len);
        throw std::bad_alloc();
      }
      return moved;
    }
    if (mmap(to, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
      (void)munmap(to, len);
      throw std::bad_alloc();
    }
#if defined(MADV_HUGEPAGE)
    (void)madvise(to, len, MADV_HUGEPAGE);  // advice only: where refused, the pages stay small
#endif
    if (data != nullptr) {
      std::memcpy(to, data, old_bytes);
      std::free(data);
    }
    return to;
  }
#endif
  (void)old_bytes;
  void* grown = std::realloc(data, new_bytes);
  if (grown == nullptr) throw std::bad_alloc();
  return grown;
}

void detail::FreeBuffer(void* data, std::size_t bytes) noexcept {
  if (data == nullptr) return;
#if defined(__linux__)
  if (bytes >= kLarge) {
    (void)munmap(data, Mapped(bytes));
    return;
  }
#endif
  (void)bytes;
  std::free(data);
}

}  // namespace testbed
