#include "testbed/kept_blocks.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace testbed {
namespace {

constexpr std::size_t kPage = std::size_t{2} << 20;

[[nodiscard]] std::size_t Rounded(std::size_t bytes) noexcept { return (bytes + kPage - 1) / kPage * kPage; }

struct Kept {
  void* block;
  std::size_t bytes;  // rounded
};

// The kept blocks, the most recently given back last; room for one past the limit, taken
// up front, so that giving a block back never allocates.
struct Store {
  Store() { kept.reserve(kKeptBlocks + 1); }
  std::mutex mu;
  std::vector<Kept> kept;
  std::size_t bytes = 0;
};
thread_local int dropping = 0;  // DropGivenBlocks alive on this thread

Store& TheStore() {
  static Store* store = new Store;  // never destroyed: blocks may be given back at exit
  return *store;
}

#if defined(__linux__)
void* MapBlock(std::size_t bytes) {
  // Mapped with a page of slack, then trimmed to a 2 MiB boundary, so that the whole block
  // can be backed by huge pages.
  void* raw = mmap(nullptr, bytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (begin + kPage - 1) & ~(kPage - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  const std::uintptr_t end = begin + bytes + kPage, used_end = aligned + bytes;
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
#if defined(MADV_HUGEPAGE)
  (void)madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);  // advice only
#endif
  return reinterpret_cast<void*>(aligned);
}
void UnmapBlock(void* block, std::size_t bytes) noexcept { munmap(block, bytes); }
#else
void* MapBlock(std::size_t bytes) { return ::operator new(bytes, std::align_val_t{kPage}); }
void UnmapBlock(void* block, std::size_t) noexcept { ::operator delete(block, std::align_val_t{kPage}); }
#endif

}  // namespace

void* TakeBlock(std::size_t bytes) {
  const std::size_t size = Rounded(bytes);
  {
    Store& s = TheStore();
    std::lock_guard<std::mutex> lock(s.mu);
    for (std::size_t k = s.kept.size(); k-- > 0;) {
      if (s.kept[k].bytes != size) continue;
      void* block = s.kept[k].block;
      s.kept.erase(s.kept.begin() + static_cast<std::ptrdiff_t>(k));
      s.bytes -= size;
      return block;
    }
  }
  return MapBlock(size);
}

void GiveBlock(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  const std::size_t size = Rounded(bytes);
  if (size > kKeptBytes || dropping > 0) {
    UnmapBlock(block, size);
    return;
  }
  // Past either limit, the oldest kept blocks go back to the kernel (outside the lock).
  std::array<Kept, kKeptBlocks + 1> dropped{};
  std::size_t drop = 0;
  {
    Store& s = TheStore();
    std::lock_guard<std::mutex> lock(s.mu);
    s.kept.push_back(Kept{block, size});  // within the capacity taken up front
    s.bytes += size;
    while (s.kept.size() - drop > kKeptBlocks || s.bytes > kKeptBytes) {
      s.bytes -= s.kept[drop].bytes;
      dropped[drop] = s.kept[drop];
      ++drop;
    }
    s.kept.erase(s.kept.begin(), s.kept.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  for (std::size_t k = 0; k < drop; ++k) UnmapBlock(dropped[k].block, dropped[k].bytes);
}

DropGivenBlocks::DropGivenBlocks() noexcept { ++dropping; }
DropGivenBlocks::~DropGivenBlocks() { --dropping; }

void ReleaseKeptBlocks() noexcept {
  std::vector<Kept> all;
  {
    Store& s = TheStore();
    std::lock_guard<std::mutex> lock(s.mu);
    all.swap(s.kept);
    s.bytes = 0;
  }
  for (const Kept& k : all) UnmapBlock(k.block, k.bytes);
}

std::size_t KeptBlockBytes() noexcept {
  Store& s = TheStore();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.bytes;
}

}  // namespace testbed
