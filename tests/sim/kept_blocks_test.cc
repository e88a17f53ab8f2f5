// Blocks for large buffers (testbed/kept_blocks.h): a freed block is handed out again for a
// buffer of the same size, aligned to 2 MiB, and no more are kept than the limits allow.
#include "testbed/kept_blocks.h"

#include "huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

namespace testbed {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(KeptBlocks, AFreedBlockServesTheNextOfItsSize) {
  ReleaseKeptBlocks();
  void* a = TakeBlock(10 * kMiB);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % (2 * kMiB), 0u);
  std::memset(a, 7, 10 * kMiB);  // the whole block is writable
  GiveBlock(a, 10 * kMiB);
  EXPECT_EQ(KeptBlockBytes(), 10 * kMiB);
  // Another size (rounded to other whole 2 MiB pages) gets a block of its own.
  void* b = TakeBlock(13 * kMiB);
  EXPECT_NE(b, a);
  EXPECT_EQ(KeptBlockBytes(), 10 * kMiB);
  // The same rounded size gets the kept one back, as it was left.
  void* c = TakeBlock(9 * kMiB + 1);
  EXPECT_EQ(c, a);
  EXPECT_EQ(static_cast<unsigned char*>(c)[10 * kMiB - 1], 7);
  EXPECT_EQ(KeptBlockBytes(), 0u);
  GiveBlock(b, 13 * kMiB);
  GiveBlock(c, 10 * kMiB);
  EXPECT_EQ(KeptBlockBytes(), 24 * kMiB);
  ReleaseKeptBlocks();
  EXPECT_EQ(KeptBlockBytes(), 0u);
}

TEST(KeptBlocks, KeepsNoMoreThanTheLimits) {
  ReleaseKeptBlocks();
  std::vector<void*> blocks;
  for (std::size_t k = 0; k < kKeptBlocks + 3; ++k) blocks.push_back(TakeBlock(4 * kMiB));
  for (void* b : blocks) GiveBlock(b, 4 * kMiB);
  EXPECT_EQ(KeptBlockBytes(), kKeptBlocks * 4 * kMiB);  // the oldest three went back
  // The most recently given back are kept: taking them all back finds each.
  for (std::size_t k = 0; k < kKeptBlocks; ++k) {
    void* b = TakeBlock(4 * kMiB);
    EXPECT_NE(std::find(blocks.begin() + 3, blocks.end(), b), blocks.end());
    GiveBlock(b, 4 * kMiB);
  }
  // A block past the byte limit is never kept (its address space is only reserved, not touched).
  void* huge = TakeBlock(kKeptBytes + 2 * kMiB);
  GiveBlock(huge, kKeptBytes + 2 * kMiB);
  EXPECT_LE(KeptBlockBytes(), kKeptBytes);
  EXPECT_EQ(KeptBlockBytes(), kKeptBlocks * 4 * kMiB);
  ReleaseKeptBlocks();
}

TEST(KeptBlocks, VectorsOfAnySizeBehaveAsWithTheStandardAllocator) {
  ReleaseKeptBlocks();
  std::vector<std::int64_t, BlockAllocator<std::int64_t>> small(100, 3), large;
  EXPECT_EQ(small[99], 3);
  for (std::int64_t k = 0; k < 3'000'000; ++k) large.push_back(k);  // grows through several blocks
  EXPECT_EQ(large[2'999'999], 2'999'999);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.data()) % (2 * kMiB), 0u);
  const std::int64_t* where = large.data();
  const std::size_t capacity = large.capacity();
  decltype(large)().swap(large);  // freed
  // A vector grown the same way again gets the same block.
  std::vector<std::int64_t, BlockAllocator<std::int64_t>> again;
  again.reserve(capacity);
  EXPECT_EQ(again.data(), where);
  ReleaseKeptBlocks();
}

// A growing vector's old buffer goes back to the kernel (keeping it would add its size to the
// process's peak while the larger one is in use); what the vector holds at the end is kept.
TEST(KeptBlocks, AGrowingVectorsOldBuffersAreNotKept) {
  ReleaseKeptBlocks();
  {
    DropGivenBlocks drop;
    GiveBlock(TakeBlock(6 * kMiB), 6 * kMiB);
    EXPECT_EQ(KeptBlockBytes(), 0u);
  }
  std::vector<std::int64_t, BlockAllocator<std::int64_t>> v;
  for (std::int64_t k = 0; k < 2'000'000; ++k) {
    GrowHuge(v, 1);
    v.push_back(k);
  }
  EXPECT_EQ(KeptBlockBytes(), 0u);  // every smaller buffer was dropped on the way
  const std::size_t bytes = v.capacity() * sizeof(std::int64_t);
  decltype(v)().swap(v);
  EXPECT_EQ(KeptBlockBytes(), (bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB));
  ReleaseKeptBlocks();
}

}  // namespace
}  // namespace testbed
