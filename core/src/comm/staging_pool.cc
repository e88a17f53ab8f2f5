#include "comm/staging_pool.h"

#include <bit>

namespace testbed::comm {

PooledBlock& PooledBlock::operator=(PooledBlock&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr) pool_->GiveBack(data_, capacity_);
    pool_ = std::move(other.pool_);
    data_ = other.data_;
    capacity_ = other.capacity_;
    other.pool_ = nullptr;
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  return *this;
}

PooledBlock::~PooledBlock() {
  if (pool_ != nullptr) pool_->GiveBack(data_, capacity_);
}

StagingPool::~StagingPool() {
  for (auto& [capacity, blocks] : free_) {
    for (void* b : blocks) memory_->Release(b);
  }
}

absl::StatusOr<PooledBlock> StagingPool::Acquire(std::size_t bytes) {
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(bytes, 256));
  std::lock_guard<std::mutex> lock(mu_);
  auto& idle = free_[capacity];
  if (!idle.empty()) {
    void* data = idle.back();
    idle.pop_back();
    return PooledBlock(shared_from_this(), data, capacity);
  }
  absl::StatusOr<void*> data = memory_->Allocate(capacity);
  if (!data.ok()) return data.status();
  ++allocated_;
  return PooledBlock(shared_from_this(), *data, capacity);
}

std::size_t StagingPool::blocks_allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_;
}

void StagingPool::GiveBack(void* data, std::size_t capacity) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  free_[capacity].push_back(data);
}

}  // namespace testbed::comm
