// One process's endpoint on a group of the mpi communicator: MPI's non-blocking
// collectives and point-to-point calls on a communicator duplicated for the group, waited
// for by polling so that every wait has a deadline.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "group_core.h"
#include "mpi_request.h"
#include "testbed/communicator.h"

namespace testbed::mpi {

// How IAllReduce is carried out: OpenMPI's MPI_Iallreduce, or the ring of ring_all_reduce.h
// streamed in segments of `segment_bytes`.
struct AllReduceSettings {
  enum class Algorithm { kLibrary, kRing };
  Algorithm algorithm = Algorithm::kLibrary;
  std::int64_t segment_bytes = 256 << 10;
};

class MpiGroup final : public CommGroup {
 public:
  MpiGroup(std::shared_ptr<GroupCore> core, AllReduceSettings all_reduce)
      : core_(std::move(core)), all_reduce_(all_reduce) {}

  [[nodiscard]] int rank() const noexcept override { return core_->rank(); }
  [[nodiscard]] int size() const noexcept override { return core_->size(); }
  [[nodiscard]] const std::vector<int>& world_ranks() const noexcept override { return core_->world_ranks(); }
  [[nodiscard]] MemorySpace memory_space() const noexcept override { return MemorySpace::kHost; }
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

  // Makes the group's two communicators from `parent` with MPI_Comm_idup, polled against the
  // deadline. Collective over `parent`.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<GroupCore>> MakeCore(MPI_Comm parent, std::vector<int> world_ranks,
                                                                           double timeout_s, bool track_arrivals,
                                                                           const std::string& what);

 private:
  // Numbers a new collective, announces it to the peers and wraps its requests.
  [[nodiscard]] absl::StatusOr<CommRequestPtr> Started(const char* name, int rc, MPI_Request request,
                                                       std::shared_ptr<void> buffers, std::int64_t seq);
  [[nodiscard]] std::int64_t NextCollective();
  // The handshake before MPI_Comm_create_group, which itself cannot time out: every member
  // confirms it is there (and agrees on which group it is making) within the deadline.
  [[nodiscard]] absl::Status Handshake(const std::vector<int>& members, std::uint64_t key);

  std::shared_ptr<GroupCore> core_;
  AllReduceSettings all_reduce_;
  std::int64_t next_seq_ = 0;
  std::map<std::vector<int>, int> groups_created_;
};

}  // namespace testbed::mpi
