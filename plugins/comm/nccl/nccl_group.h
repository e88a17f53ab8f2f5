// One GPU rank's endpoint on a group of the nccl communicator: NCCL collectives (and groups
// of NCCL calls for the uneven variants) queued on the rank's stream, completion polled
// against the deadline. Buffers are device memory of the rank's GPU.
//
// Point-to-point follows NCCL: a send and a receive between two ranks match in posting
// order; the tag must agree but does not reorder. A rank cannot send to itself.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "endpoint_core.h"
#include "nccl_request.h"
#include "testbed/communicator.h"

namespace testbed::nccl {

class NcclGroup final : public CommGroup {
 public:
  explicit NcclGroup(std::shared_ptr<EndpointCore> core) : core_(std::move(core)) {}

  [[nodiscard]] int rank() const noexcept override { return core_->rank(); }
  [[nodiscard]] int size() const noexcept override { return core_->size(); }
  [[nodiscard]] const std::vector<int>& world_ranks() const noexcept override { return core_->shared().world_ranks; }
  [[nodiscard]] MemorySpace memory_space() const noexcept override { return MemorySpace::kCuda; }
  [[nodiscard]] double timeout_s() const noexcept override { return core_->timeout_s(); }

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
  // Numbers a collective and marks this rank as having started it.
  [[nodiscard]] std::int64_t NextCollective();
  // Wraps the result of the NCCL calls: an error breaks the group; otherwise an event
  // recorded after them on the stream becomes the request.
  [[nodiscard]] absl::StatusOr<CommRequestPtr> Started(OpLabel label, ncclResult_t result);
  // bit_or (which NCCL lacks): all-gather every member's `total` elements, then OR the
  // members' elements [offset, offset + count) into out.
  [[nodiscard]] ncclResult_t BitOr(const void* send, void* out, std::int64_t total, std::int64_t offset,
                                   std::int64_t count, DataType type);
  [[nodiscard]] absl::Status Prepare(const char* what) const;

  std::shared_ptr<EndpointCore> core_;
  std::int64_t next_seq_ = 0;
  std::map<std::vector<int>, int> groups_created_;
};

}  // namespace testbed::nccl
