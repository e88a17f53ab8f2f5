// The CommGroup MakeHostStaged returns (host_staging.h): host buffers in, device blocks to the
// wrapped group, results copied back when the request finishes.
#pragma once

#include <memory>
#include <vector>

#include "comm/staged_request.h"
#include "comm/staging_pool.h"
#include "testbed/communicator.h"

namespace testbed::comm {

class HostStagedGroup final : public CommGroup {
 public:
  HostStagedGroup(std::unique_ptr<CommGroup> device_group, std::shared_ptr<StagingPool> pool)
      : inner_(std::move(device_group)), pool_(std::move(pool)) {}

  [[nodiscard]] int rank() const noexcept override { return inner_->rank(); }
  [[nodiscard]] int size() const noexcept override { return inner_->size(); }
  [[nodiscard]] const std::vector<int>& world_ranks() const noexcept override { return inner_->world_ranks(); }
  [[nodiscard]] MemorySpace memory_space() const noexcept override { return MemorySpace::kHost; }
  [[nodiscard]] double timeout_s() const noexcept override { return inner_->timeout_s(); }

  [[nodiscard]] absl::StatusOr<CommRequestPtr> IAllReduce(const void* send, void* recv, std::int64_t count,
                                                          DataType type, ReduceOp op) override;
  [[nodiscard]] absl::StatusOr<CommRequestPtr> IBroadcast(void* buffer, std::int64_t count, DataType type,
                                                          int root) override;
  [[nodiscard]] absl::StatusOr<CommRequestPtr> IAllGatherV(const void* send, void* recv,
                                                           std::span<const std::int64_t> counts,
                                                           DataType type) override;
  [[nodiscard]] absl::StatusOr<CommRequestPtr> IReduceScatterV(const void* send, void* recv,
                                                               std::span<const std::int64_t> counts, DataType type,
                                                               ReduceOp op) override;
  [[nodiscard]] absl::StatusOr<CommRequestPtr> IAllToAllV(const void* send, std::span<const std::int64_t> send_counts,
                                                          void* recv, std::span<const std::int64_t> recv_counts,
                                                          DataType type) override;
  [[nodiscard]] absl::StatusOr<CommRequestPtr> ISend(const void* buffer, std::int64_t count, DataType type, int peer,
                                                     int tag) override;
  [[nodiscard]] absl::StatusOr<CommRequestPtr> IRecv(void* buffer, std::int64_t count, DataType type, int peer,
                                                     int tag) override;
  [[nodiscard]] absl::StatusOr<CommRequestPtr> IBarrier() override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommGroup>> NewGroup(const std::vector<int>& members) override;

 private:
  // A device block holding `bytes`, filled from `host` when it is not null.
  [[nodiscard]] absl::StatusOr<PooledBlock> Stage(const char* what, std::size_t bytes, const void* host = nullptr);
  // The request of a started wrapped operation, or its error (blocks go back to the pool).
  [[nodiscard]] absl::StatusOr<CommRequestPtr> Started(const char* what, absl::StatusOr<CommRequestPtr> inner,
                                                       CopyOut copy, PooledBlock first, PooledBlock second = {});

  std::unique_ptr<CommGroup> inner_;
  std::shared_ptr<StagingPool> pool_;
};

}  // namespace testbed::comm
