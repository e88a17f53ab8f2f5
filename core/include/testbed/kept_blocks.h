// Large buffers that a process fills and frees again and again (a schedule's tasks, built
// anew for every simulation of a sweep or of a planner's search) are handed out as blocks of
// whole 2 MiB pages mapped on their own, with huge pages asked for, and a freed block is kept
// for the next buffer of the same size instead of going back to the kernel, which would
// otherwise hand out fresh pages and clear each of them on first touch.
//
// At most kKeptBlocks blocks and kKeptBytes bytes are kept (past either limit the oldest go
// back first), and a block given back under DropGivenBlocks (the buffer a growing vector
// leaves behind) is never kept; ReleaseKeptBlocks returns them all to the kernel. Buffers
// under kBlockBytes come from the ordinary allocator. Where blocks cannot be mapped (not
// Linux), they come from aligned operator new and are kept the same way.
#pragma once

#include <cstddef>
#include <memory>

namespace testbed {

inline constexpr std::size_t kBlockBytes = std::size_t{4} << 20;
inline constexpr std::size_t kKeptBlocks = 16;
inline constexpr std::size_t kKeptBytes = std::size_t{1} << 30;

// A block of at least `bytes` (rounded up to whole 2 MiB pages), aligned to 2 MiB: a kept
// one of that size where there is one. Throws std::bad_alloc when none can be mapped.
[[nodiscard]] void* TakeBlock(std::size_t bytes);
// Gives back a block TakeBlock handed out for `bytes`: kept, or unmapped.
void GiveBlock(void* block, std::size_t bytes) noexcept;
// Unmaps every kept block.
void ReleaseKeptBlocks() noexcept;
// While one lives on this thread, blocks given back are unmapped, not kept: the buffer a
// growing vector leaves behind is given back while the larger one is in use, and keeping
// it would raise the process's peak by its size.
class DropGivenBlocks {
 public:
  DropGivenBlocks() noexcept;
  ~DropGivenBlocks();
  DropGivenBlocks(const DropGivenBlocks&) = delete;
  DropGivenBlocks& operator=(const DropGivenBlocks&) = delete;
};
// Bytes of the blocks kept now (memory the process holds but does not use).
[[nodiscard]] std::size_t KeptBlockBytes() noexcept;

// std::allocator, with buffers of kBlockBytes or more taken as blocks.
template <typename T>
struct BlockAllocator {
  using value_type = T;
  BlockAllocator() noexcept = default;
  template <typename U>
  BlockAllocator(const BlockAllocator<U>&) noexcept {}  // NOLINT: converting, as std::allocator
  [[nodiscard]] T* allocate(std::size_t n) {
    if (n * sizeof(T) < kBlockBytes) return std::allocator<T>().allocate(n);
    return static_cast<T*>(TakeBlock(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kBlockBytes) {
      std::allocator<T>().deallocate(p, n);
      return;
    }
    GiveBlock(p, n * sizeof(T));
  }
  friend bool operator==(const BlockAllocator&, const BlockAllocator&) noexcept { return true; }
};

}  // namespace testbed
