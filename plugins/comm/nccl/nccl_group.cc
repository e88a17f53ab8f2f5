#include "nccl_group.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "bit_or.h"
#include "testbed/status_macros.h"

namespace testbed::nccl {
namespace {

ncclDataType_t ToNccl(DataType type) noexcept {
  switch (type) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kUInt8: return ncclUint8;
    case DataType::kUInt32: return ncclUint32;
    case DataType::kUInt64: return ncclUint64;
  }
  return ncclFloat32;
}

ncclRedOp_t ToNccl(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kBitOr: break;  // handled by BitOr
  }
  return ncclSum;
}

const char* At(const void* base, std::int64_t elements, DataType type) {
  return static_cast<const char*>(base) + elements * static_cast<std::int64_t>(DataTypeSize(type));
}
char* At(void* base, std::int64_t elements, DataType type) {
  return static_cast<char*>(base) + elements * static_cast<std::int64_t>(DataTypeSize(type));
}

bool AllEqual(std::span<const std::int64_t> counts) {
  for (std::int64_t c : counts) {
    if (c != counts[0]) return false;
  }
  return true;
}

}  // namespace

absl::Status NcclGroup::Prepare(const char* what) const {
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  return core_->UseDevice();
}

std::int64_t NcclGroup::NextCollective() {
  const std::int64_t seq = next_seq_++;
  core_->shared_ptr()->board.Started(core_->rank(), seq);
  return seq;
}

absl::StatusOr<CommRequestPtr> NcclGroup::Started(OpLabel label, ncclResult_t result) {
  if (result != ncclSuccess && result != ncclInProgress) {
    absl::Status error = absl::InternalError(absl::StrCat(label.name, " on group ", core_->shared().name, ": ",
                                                          ncclGetErrorString(result)));
    core_->Abort(error);
    return error;
  }
  cudaEvent_t done = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(done, core_->stream());
  if (e != cudaSuccess) {
    if (done != nullptr) cudaEventDestroy(done);
    // The operation is queued and cannot be waited for: stop the group rather than let it run
    // on buffers the caller will take back.
    absl::Status error = absl::InternalError(absl::StrCat(label.name, ": cuda event: ", cudaGetErrorString(e)));
    core_->Abort(error);
    return error;
  }
  return std::make_unique<NcclRequest>(core_, label, done);
}

ncclResult_t NcclGroup::BitOr(const void* send, void* out, std::int64_t total, std::int64_t offset, std::int64_t count,
                              DataType type) {
  const int n = size();
  const auto esize = static_cast<std::int64_t>(DataTypeSize(type));
  void* gathered = nullptr;
  if (cudaMallocAsync(&gathered, static_cast<size_t>(std::max<std::int64_t>(n * total * esize, 1)), core_->stream()) !=
      cudaSuccess) {
    return ncclUnhandledCudaError;
  }
  ncclResult_t r = ncclAllGather(send, gathered, static_cast<size_t>(total), ToNccl(type), core_->comm(), core_->stream());
  if (r == ncclSuccess &&
      LaunchBitOr(gathered, out, count, total, offset, n, static_cast<int>(esize), core_->stream()) != 0) {
    r = ncclUnhandledCudaError;
  }
  cudaFreeAsync(gathered, core_->stream());
  return r;
}

absl::StatusOr<CommRequestPtr> NcclGroup::IAllReduce(const void* send, void* recv, std::int64_t count, DataType type,
                                                     ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, send, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, recv, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(Prepare("all_reduce"));
  const std::int64_t seq = NextCollective();
  const ncclResult_t r =
      op == ReduceOp::kBitOr
          ? BitOr(send, recv, count, 0, count, type)
          : ncclAllReduce(send, recv, static_cast<size_t>(count), ToNccl(type), ToNccl(op), core_->comm(), core_->stream());
  return Started(OpLabel{"all_reduce", seq, -1}, r);
}

absl::StatusOr<CommRequestPtr> NcclGroup::IBroadcast(void* buffer, std::int64_t count, DataType type, int root) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "broadcast"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(root, size(), "root", "broadcast"));
  TESTBED_RETURN_IF_ERROR(Prepare("broadcast"));
  const std::int64_t seq = NextCollective();
  const ncclResult_t r =
      ncclBroadcast(buffer, buffer, static_cast<size_t>(count), ToNccl(type), root, core_->comm(), core_->stream());
  return Started(OpLabel{"broadcast", seq, -1}, r);
}

absl::StatusOr<CommRequestPtr> NcclGroup::IAllGatherV(const void* send, void* recv,
                                                      std::span<const std::int64_t> counts, DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), recv, "all_gather_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(counts[static_cast<size_t>(rank())], send, "all_gather_v"));
  TESTBED_RETURN_IF_ERROR(Prepare("all_gather_v"));
  const std::int64_t seq = NextCollective();
  ncclResult_t r = ncclSuccess;
  if (AllEqual(counts)) {
    r = ncclAllGather(send, recv, static_cast<size_t>(counts[0]), ToNccl(type), core_->comm(), core_->stream());
  } else {
    // Uneven: one broadcast per member, fused into one NCCL group.
    r = ncclGroupStart();
    std::int64_t offset = 0;
    for (int k = 0; k < size() && r == ncclSuccess; ++k) {
      const std::int64_t c = counts[static_cast<size_t>(k)];
      if (c > 0) {
        const void* src = k == rank() ? send : At(recv, offset, type);
        r = ncclBroadcast(src, At(recv, offset, type), static_cast<size_t>(c), ToNccl(type), k, core_->comm(),
                          core_->stream());
      }
      offset += c;
    }
    const ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess) r = end;
  }
  return Started(OpLabel{"all_gather_v", seq, -1}, r);
}

absl::StatusOr<CommRequestPtr> NcclGroup::IReduceScatterV(const void* send, void* recv,
                                                          std::span<const std::int64_t> counts, DataType type,
                                                          ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), send, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(counts[static_cast<size_t>(rank())], recv, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(Prepare("reduce_scatter_v"));
  const std::int64_t seq = NextCollective();
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  std::int64_t mine = 0;
  for (int k = 0; k < rank(); ++k) mine += counts[static_cast<size_t>(k)];
  ncclResult_t r = ncclSuccess;
  if (op == ReduceOp::kBitOr) {
    r = BitOr(send, recv, total, mine, counts[static_cast<size_t>(rank())], type);
  } else if (AllEqual(counts)) {
    r = ncclReduceScatter(send, recv, static_cast<size_t>(counts[0]), ToNccl(type), ToNccl(op), core_->comm(),
                          core_->stream());
  } else {
    // Uneven: one reduce to each member, fused into one NCCL group.
    r = ncclGroupStart();
    std::int64_t offset = 0;
    for (int k = 0; k < size() && r == ncclSuccess; ++k) {
      const std::int64_t c = counts[static_cast<size_t>(k)];
      if (c > 0) {
        r = ncclReduce(At(send, offset, type), recv, static_cast<size_t>(c), ToNccl(type), ToNccl(op), k, core_->comm(),
                       core_->stream());
      }
      offset += c;
    }
    const ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess) r = end;
  }
  return Started(OpLabel{"reduce_scatter_v", seq, -1}, r);
}

absl::StatusOr<CommRequestPtr> NcclGroup::IAllToAllV(const void* send, std::span<const std::int64_t> send_counts,
                                                     void* recv, std::span<const std::int64_t> recv_counts,
                                                     DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(send_counts, size(), send, "all_to_all_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(recv_counts, size(), recv, "all_to_all_v"));
  TESTBED_RETURN_IF_ERROR(Prepare("all_to_all_v"));
  const std::int64_t seq = NextCollective();
  ncclResult_t r = ncclGroupStart();
  std::int64_t send_offset = 0, recv_offset = 0;
  for (int p = 0; p < size() && r == ncclSuccess; ++p) {
    const std::int64_t s = send_counts[static_cast<size_t>(p)];
    const std::int64_t c = recv_counts[static_cast<size_t>(p)];
    if (s > 0) r = ncclSend(At(send, send_offset, type), static_cast<size_t>(s), ToNccl(type), p, core_->comm(), core_->stream());
    if (r == ncclSuccess && c > 0) {
      r = ncclRecv(At(recv, recv_offset, type), static_cast<size_t>(c), ToNccl(type), p, core_->comm(), core_->stream());
    }
    send_offset += s;
    recv_offset += c;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (r == ncclSuccess) r = end;
  return Started(OpLabel{"all_to_all_v", seq, -1}, r);
}

absl::StatusOr<CommRequestPtr> NcclGroup::IBarrier() {
  TESTBED_RETURN_IF_ERROR(Prepare("barrier"));
  const std::int64_t seq = NextCollective();
  // NCCL has no barrier: a one-element all-reduce finishes only once every member joined.
  const ncclResult_t r = ncclAllReduce(core_->scratch(), core_->scratch(), 1, ncclInt32, ncclSum, core_->comm(),
                                       core_->stream());
  return Started(OpLabel{"barrier", seq, -1}, r);
}

absl::StatusOr<CommRequestPtr> NcclGroup::ISend(const void* buffer, std::int64_t count, DataType type, int peer,
                                                int tag) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "send"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", "send"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, "send"));
  if (peer == rank()) return absl::InvalidArgumentError("send: the nccl communicator cannot send to the same rank");
  TESTBED_RETURN_IF_ERROR(Prepare("send"));
  const ncclResult_t r = ncclSend(buffer, static_cast<size_t>(count), ToNccl(type), peer, core_->comm(), core_->stream());
  return Started(OpLabel{"send", -1, peer}, r);
}

absl::StatusOr<CommRequestPtr> NcclGroup::IRecv(void* buffer, std::int64_t count, DataType type, int peer, int tag) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "recv"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", "recv"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, "recv"));
  if (peer == rank()) return absl::InvalidArgumentError("recv: the nccl communicator cannot receive from the same rank");
  TESTBED_RETURN_IF_ERROR(Prepare("recv"));
  const ncclResult_t r = ncclRecv(buffer, static_cast<size_t>(count), ToNccl(type), peer, core_->comm(), core_->stream());
  return Started(OpLabel{"recv", -1, peer}, r);
}

absl::StatusOr<std::unique_ptr<CommGroup>> NcclGroup::NewGroup(const std::vector<int>& members) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Members(members, size(), rank()));
  TESTBED_RETURN_IF_ERROR(Prepare("new_group"));
  const int nth = groups_created_[members]++;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s()));
  TESTBED_ASSIGN_OR_RETURN(auto joined, core_->shared_ptr()->Join(rank(), members, nth, deadline, timeout_s()));
  int index = 0;
  while (members[static_cast<size_t>(index)] != rank()) ++index;
  if (const cudaError_t e = cudaSetDevice(joined.first->devices[static_cast<size_t>(index)]); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("new_group: cudaSetDevice: ", cudaGetErrorString(e)));
  }
  ncclComm_t comm = nullptr;
  // Every member has joined, so this collective initialisation returns promptly.
  const ncclResult_t r = ncclCommInitRank(&comm, static_cast<int>(members.size()), joined.second, index);
  if (r != ncclSuccess) {
    return absl::UnavailableError(absl::StrCat("new_group: ncclCommInitRank: ", ncclGetErrorString(r)));
  }
  return std::unique_ptr<CommGroup>(
      std::make_unique<NcclGroup>(std::make_shared<EndpointCore>(std::move(joined.first), index, comm, timeout_s())));
}

}  // namespace testbed::nccl
