// A fake device for tests of code that stages host buffers through device memory: host
// blocks posing as device memory (FakeDeviceMemory), and a group that forwards to a
// host-memory group but fails any operation given a pointer outside those blocks
// (DeviceOnlyGroup), so that a host buffer slipping through is caught, not silently tolerated
// by host-memory collectives.
#pragma once

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "testbed/communicator.h"
#include "testbed/host_staging.h"

namespace testbed::testing {

// Host blocks posing as device memory; remembers which addresses are "device" addresses.
class FakeDeviceMemory final : public DeviceMemory {
 public:
  ~FakeDeviceMemory() override { EXPECT_TRUE(blocks_.empty()) << blocks_.size() << " device blocks never released"; }

  absl::StatusOr<void*> Allocate(std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_allocations_) return absl::ResourceExhaustedError("fake device is out of memory");
    void* p = std::malloc(bytes);
    blocks_[static_cast<char*>(p)] = bytes;
    ++allocations_;
    return p;
  }
  void Release(void* block) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.erase(static_cast<char*>(block));
    std::free(block);
  }
  absl::Status ToDevice(void* dst, const void* src, std::size_t bytes) override {
    if (!Contains(dst, bytes)) return absl::InternalError("ToDevice into host memory");
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status ToHost(void* dst, const void* src, std::size_t bytes) override {
    if (!Contains(src, bytes)) return absl::InternalError("ToHost from host memory");
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }

  // True when [p, p + bytes) lies inside one device block.
  [[nodiscard]] bool Contains(const void* p, std::size_t bytes) const {
    std::lock_guard<std::mutex> lock(mu_);
    const char* c = static_cast<const char*>(p);
    auto it = blocks_.upper_bound(const_cast<char*>(c));
    if (it == blocks_.begin()) return false;
    --it;
    return c >= it->first && c + bytes <= it->first + it->second;
  }
  [[nodiscard]] int allocations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocations_;
  }
  void set_fail_allocations(bool fail) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_allocations_ = fail;
  }

 private:
  mutable std::mutex mu_;
  std::map<char*, std::size_t> blocks_;
  int allocations_ = 0;
  bool fail_allocations_ = false;
};

// Forwards to a host-memory group after checking that every buffer is fake device memory.
class DeviceOnlyGroup final : public CommGroup {
 public:
  DeviceOnlyGroup(std::unique_ptr<CommGroup> inner, std::shared_ptr<FakeDeviceMemory> memory)
      : inner_(std::move(inner)), memory_(std::move(memory)) {}

  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  const std::vector<int>& world_ranks() const noexcept override { return inner_->world_ranks(); }
  MemorySpace memory_space() const noexcept override { return MemorySpace::kCuda; }
  double timeout_s() const noexcept override { return inner_->timeout_s(); }

  absl::StatusOr<CommRequestPtr> IAllReduce(const void* send, void* recv, std::int64_t count, DataType type,
                                            ReduceOp op) override {
    if (absl::Status s = Check({{send, count}, {recv, count}}, type); !s.ok()) return s;
    return inner_->IAllReduce(send, recv, count, type, op);
  }
  absl::StatusOr<CommRequestPtr> IBroadcast(void* buffer, std::int64_t count, DataType type, int root) override {
    if (absl::Status s = Check({{buffer, count}}, type); !s.ok()) return s;
    return inner_->IBroadcast(buffer, count, type, root);
  }
  absl::StatusOr<CommRequestPtr> IAllGatherV(const void* send, void* recv, std::span<const std::int64_t> counts,
                                             DataType type) override {
    if (absl::Status s = Check({{send, counts[static_cast<size_t>(rank())]}, {recv, Sum(counts)}}, type); !s.ok()) {
      return s;
    }
    return inner_->IAllGatherV(send, recv, counts, type);
  }
  absl::StatusOr<CommRequestPtr> IReduceScatterV(const void* send, void* recv, std::span<const std::int64_t> counts,
                                                 DataType type, ReduceOp op) override {
    if (absl::Status s = Check({{send, Sum(counts)}, {recv, counts[static_cast<size_t>(rank())]}}, type); !s.ok()) {
      return s;
    }
    return inner_->IReduceScatterV(send, recv, counts, type, op);
  }
  absl::StatusOr<CommRequestPtr> IAllToAllV(const void* send, std::span<const std::int64_t> send_counts, void* recv,
                                            std::span<const std::int64_t> recv_counts, DataType type) override {
    if (absl::Status s = Check({{send, Sum(send_counts)}, {recv, Sum(recv_counts)}}, type); !s.ok()) return s;
    return inner_->IAllToAllV(send, send_counts, recv, recv_counts, type);
  }
  absl::StatusOr<CommRequestPtr> ISend(const void* buffer, std::int64_t count, DataType type, int peer,
                                       int tag) override {
    if (absl::Status s = Check({{buffer, count}}, type); !s.ok()) return s;
    return inner_->ISend(buffer, count, type, peer, tag);
  }
  absl::StatusOr<CommRequestPtr> IRecv(void* buffer, std::int64_t count, DataType type, int peer, int tag) override {
    if (absl::Status s = Check({{buffer, count}}, type); !s.ok()) return s;
    return inner_->IRecv(buffer, count, type, peer, tag);
  }
  absl::StatusOr<CommRequestPtr> IBarrier() override { return inner_->IBarrier(); }
  absl::StatusOr<std::unique_ptr<CommGroup>> NewGroup(const std::vector<int>& members) override {
    auto sub = inner_->NewGroup(members);
    if (!sub.ok()) return sub.status();
    return std::unique_ptr<CommGroup>(std::make_unique<DeviceOnlyGroup>(std::move(*sub), memory_));
  }

 private:
  struct Use {
    const void* p;
    std::int64_t count;
  };
  static std::int64_t Sum(std::span<const std::int64_t> counts) {
    std::int64_t total = 0;
    for (std::int64_t c : counts) total += c;
    return total;
  }
  absl::Status Check(std::initializer_list<Use> uses, DataType type) const {
    for (const Use& u : uses) {
      if (u.count > 0 && !memory_->Contains(u.p, static_cast<std::size_t>(u.count) * DataTypeSize(type))) {
        ADD_FAILURE() << "a host pointer reached the device-memory group";
        return absl::InternalError("host pointer given to a device-memory group");
      }
    }
    return absl::OkStatus();
  }

  std::unique_ptr<CommGroup> inner_;
  std::shared_ptr<FakeDeviceMemory> memory_;
};

}  // namespace testbed::testing
