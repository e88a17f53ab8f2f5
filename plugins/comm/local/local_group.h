// One rank's endpoint on a group of the local communicator (ranks are threads of one
// process). Collectives run on the rank's progress worker in issue order; sends and
// receives are matched in the group's mailbox.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "collective_args.h"
#include "group_state.h"
#include "testbed/communicator.h"
#include "worker.h"

namespace testbed::local {

class LocalGroup final : public CommGroup {
 public:
  LocalGroup(std::shared_ptr<GroupState> state, int rank);
  // Finishes the collectives already issued (each bounded by its deadline).
  ~LocalGroup() override = default;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return static_cast<int>(state_->world_ranks.size()); }
  [[nodiscard]] const std::vector<int>& world_ranks() const noexcept override { return state_->world_ranks; }
  [[nodiscard]] MemorySpace memory_space() const noexcept override { return MemorySpace::kHost; }
  [[nodiscard]] double timeout_s() const noexcept override { return state_->timeout_s; }

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
  // Queues the collective on this rank's worker; the request finishes when this rank's share
  // is done and every member has finished with this rank's buffers.
  [[nodiscard]] absl::StatusOr<CommRequestPtr> StartCollective(CollectiveArgs args);
  [[nodiscard]] absl::StatusOr<CommRequestPtr> StartTransfer(bool is_send, const void* send, void* recv,
                                                             std::int64_t count, DataType type, int peer, int tag);

  std::shared_ptr<GroupState> state_;
  const int rank_;
  std::int64_t next_seq_ = 0;
  std::map<std::vector<int>, int> groups_created_;  // member list -> how many made so far
  Worker worker_;  // last member: destroyed first, while the state its jobs use is alive
};

}  // namespace testbed::local
