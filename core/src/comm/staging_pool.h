// Device blocks for host-staged operations, reused by size class and released only when the
// pool goes (see host_staging.h for why nothing is freed while operations may be in flight).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/host_staging.h"

namespace testbed::comm {

class StagingPool;

// A block lent by the pool, given back when destroyed.
class PooledBlock {
 public:
  PooledBlock() = default;
  PooledBlock(std::shared_ptr<StagingPool> pool, void* data, std::size_t capacity) noexcept
      : pool_(std::move(pool)), data_(data), capacity_(capacity) {}
  PooledBlock(PooledBlock&& other) noexcept { *this = std::move(other); }
  PooledBlock& operator=(PooledBlock&& other) noexcept;
  PooledBlock(const PooledBlock&) = delete;
  PooledBlock& operator=(const PooledBlock&) = delete;
  ~PooledBlock();

  [[nodiscard]] void* data() const noexcept { return data_; }
  // The block's address `bytes` in.
  [[nodiscard]] void* at(std::size_t bytes) const noexcept { return static_cast<char*>(data_) + bytes; }

 private:
  std::shared_ptr<StagingPool> pool_;
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  explicit StagingPool(std::shared_ptr<DeviceMemory> memory) : memory_(std::move(memory)) {}
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  ~StagingPool();

  // A block of at least `bytes` (rounded up to a power of two, at least 256).
  [[nodiscard]] absl::StatusOr<PooledBlock> Acquire(std::size_t bytes);
  [[nodiscard]] DeviceMemory& memory() const noexcept { return *memory_; }
  // Blocks allocated from the device so far (tests check that blocks are reused).
  [[nodiscard]] std::size_t blocks_allocated() const;

 private:
  friend class PooledBlock;
  void GiveBack(void* data, std::size_t capacity) noexcept;

  std::shared_ptr<DeviceMemory> memory_;
  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;  // capacity -> idle blocks
  std::size_t allocated_ = 0;
};

}  // namespace testbed::comm
