#include "comm/host_staged_group.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed {

std::unique_ptr<CommGroup> MakeHostStaged(std::unique_ptr<CommGroup> device_group,
                                          std::shared_ptr<DeviceMemory> memory) {
  return std::make_unique<comm::HostStagedGroup>(std::move(device_group),
                                                 std::make_shared<comm::StagingPool>(std::move(memory)));
}

namespace comm {
namespace {

[[nodiscard]] std::size_t Bytes(std::int64_t count, DataType type) noexcept {
  return static_cast<std::size_t>(count) * DataTypeSize(type);
}

[[nodiscard]] std::int64_t Total(std::span<const std::int64_t> counts) noexcept {
  return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}

}  // namespace

absl::StatusOr<PooledBlock> HostStagedGroup::Stage(const char* what, std::size_t bytes, const void* host) {
  absl::StatusOr<PooledBlock> block = pool_->Acquire(bytes);
  if (!block.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": no device block of ", bytes, " bytes for host staging: ", block.status().message()));
  }
  if (host != nullptr && bytes > 0) {
    if (absl::Status s = pool_->memory().ToDevice(block->data(), host, bytes); !s.ok()) {
      return absl::InternalError(absl::StrCat(what, ": copying the input to device memory: ", s.message()));
    }
  }
  return block;
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::Started(const char* what, absl::StatusOr<CommRequestPtr> inner,
                                                        CopyOut copy, PooledBlock first, PooledBlock second) {
  if (!inner.ok()) return inner.status();
  return CommRequestPtr(
      std::make_unique<StagedRequest>(what, pool_, std::move(first), std::move(second), copy, std::move(*inner)));
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::IAllReduce(const void* send, void* recv, std::int64_t count,
                                                           DataType type, ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, send, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, recv, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "all_reduce"));
  const std::size_t bytes = Bytes(count, type);
  TESTBED_ASSIGN_OR_RETURN(PooledBlock block, Stage("all_reduce", bytes, send));
  void* d = block.data();
  return Started("all_reduce", inner_->IAllReduce(d, d, count, type, op), {recv, d, bytes}, std::move(block));
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::IBroadcast(void* buffer, std::int64_t count, DataType type,
                                                           int root) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "broadcast"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(root, size(), "root", "broadcast"));
  const std::size_t bytes = Bytes(count, type);
  // Only the root's contents matter; the others' buffers are overwritten.
  TESTBED_ASSIGN_OR_RETURN(PooledBlock block, Stage("broadcast", bytes, rank() == root ? buffer : nullptr));
  void* d = block.data();
  return Started("broadcast", inner_->IBroadcast(d, count, type, root), {buffer, d, bytes}, std::move(block));
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::IAllGatherV(const void* send, void* recv,
                                                            std::span<const std::int64_t> counts, DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), recv, "all_gather_v"));
  const std::int64_t mine = counts[static_cast<std::size_t>(rank())];
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(mine, send, "all_gather_v"));
  const std::int64_t before = Total(counts.first(static_cast<std::size_t>(rank())));
  const std::size_t bytes = Bytes(Total(counts), type);
  TESTBED_ASSIGN_OR_RETURN(PooledBlock block, Stage("all_gather_v", bytes));
  void* own = block.at(Bytes(before, type));
  if (absl::Status s = pool_->memory().ToDevice(own, send, Bytes(mine, type)); !s.ok()) {
    return absl::InternalError(absl::StrCat("all_gather_v: copying the input to device memory: ", s.message()));
  }
  void* d = block.data();
  return Started("all_gather_v", inner_->IAllGatherV(own, d, counts, type), {recv, d, bytes}, std::move(block));
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::IReduceScatterV(const void* send, void* recv,
                                                                std::span<const std::int64_t> counts, DataType type,
                                                                ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), send, "reduce_scatter_v"));
  const std::int64_t mine = counts[static_cast<std::size_t>(rank())];
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(mine, recv, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "reduce_scatter_v"));
  TESTBED_ASSIGN_OR_RETURN(PooledBlock in, Stage("reduce_scatter_v", Bytes(Total(counts), type), send));
  TESTBED_ASSIGN_OR_RETURN(PooledBlock out, Stage("reduce_scatter_v", Bytes(mine, type)));
  void* d_in = in.data();
  void* d_out = out.data();
  return Started("reduce_scatter_v", inner_->IReduceScatterV(d_in, d_out, counts, type, op),
                 {recv, d_out, Bytes(mine, type)}, std::move(in), std::move(out));
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::IAllToAllV(const void* send, std::span<const std::int64_t> send_counts,
                                                           void* recv, std::span<const std::int64_t> recv_counts,
                                                           DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(send_counts, size(), send, "all_to_all_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(recv_counts, size(), recv, "all_to_all_v"));
  TESTBED_ASSIGN_OR_RETURN(PooledBlock in, Stage("all_to_all_v", Bytes(Total(send_counts), type), send));
  const std::size_t out_bytes = Bytes(Total(recv_counts), type);
  TESTBED_ASSIGN_OR_RETURN(PooledBlock out, Stage("all_to_all_v", out_bytes));
  void* d_in = in.data();
  void* d_out = out.data();
  return Started("all_to_all_v", inner_->IAllToAllV(d_in, send_counts, d_out, recv_counts, type),
                 {recv, d_out, out_bytes}, std::move(in), std::move(out));
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::ISend(const void* buffer, std::int64_t count, DataType type, int peer,
                                                      int tag) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "send"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", "send"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, "send"));
  TESTBED_ASSIGN_OR_RETURN(PooledBlock block, Stage("send", Bytes(count, type), buffer));
  void* d = block.data();
  return Started("send", inner_->ISend(d, count, type, peer, tag), {}, std::move(block));
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::IRecv(void* buffer, std::int64_t count, DataType type, int peer,
                                                      int tag) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "recv"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", "recv"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, "recv"));
  // A message shorter than the receive leaves the rest of the buffer as it was: the block
  // starts as a copy of it, so that copying the whole block back changes only what arrived.
  const std::size_t bytes = Bytes(count, type);
  TESTBED_ASSIGN_OR_RETURN(PooledBlock block, Stage("recv", bytes, buffer));
  void* d = block.data();
  return Started("recv", inner_->IRecv(d, count, type, peer, tag), {buffer, d, bytes}, std::move(block));
}

absl::StatusOr<CommRequestPtr> HostStagedGroup::IBarrier() { return inner_->IBarrier(); }

absl::StatusOr<std::unique_ptr<CommGroup>> HostStagedGroup::NewGroup(const std::vector<int>& members) {
  TESTBED_ASSIGN_OR_RETURN(std::unique_ptr<CommGroup> sub, inner_->NewGroup(members));
  return std::unique_ptr<CommGroup>(std::make_unique<HostStagedGroup>(std::move(sub), pool_));
}

}  // namespace comm
}  // namespace testbed
