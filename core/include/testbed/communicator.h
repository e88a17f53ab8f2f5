// Kind `communicator`: real collectives and point-to-point transfers between ranks, for the
// executor (backend "real"). Modelled on NCCL and MPI: a Communicator joins a world of ranks
// and hands out endpoints; an endpoint (CommGroup) is one rank's handle on a group of ranks.
//
// Conventions shared by every implementation:
//  * Buffers hold `count` elements of a DataType. They live in host memory for the local and
//    mpi communicators and in GPU memory (of the endpoint's device) for nccl, unless nccl's
//    host_buffers stages host memory through the GPU (host_staging.h): see memory_space().
//    Pointers must stay valid until the operation has finished.
//  * Every member of a group calls the same collectives in the same order with matching
//    arguments (same op, type, counts, root), as in MPI and NCCL. A mismatch that the
//    implementation can see is an InvalidArgument error on every member.
//  * Operations start with an `I` call that returns a CommRequest; the blocking forms start
//    the operation and wait for it. Communication of a started operation proceeds while the
//    caller computes (overlap), as far as the implementation allows.
//  * Deadline: every blocking wait is bounded by `timeout_s` (a parameter of every
//    communicator). When peers have not joined an operation within timeout_s of it starting
//    on this rank, or of the call to Wait if that is later, Wait returns
//    absl::DeadlineExceededError naming the operation, the group and the ranks that did not
//    join ("rank(s) 3 (world rank 7) did not join"). Nothing hangs forever. Test() never
//    blocks and reports a deadline only once the implementation has seen it pass.
//  * After a collective fails (deadline, mismatch), the group is broken: later operations on it
//    fail with FailedPrecondition repeating the first error, like an aborted NCCL
//    communicator. The failed operation's buffers may still be touched by the implementation
//    until the group is destroyed (MPI cannot cancel a started collective); treat a deadline
//    error as fatal for the job.
//  * An endpoint is used by one thread at a time; different endpoints (other ranks, sub-groups
//    of the same rank) may be used concurrently. Endpoints must be destroyed before the
//    Communicator that made them.
//  * Errors are absl::Status values; no exception leaves an implementation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "testbed/component.h"

namespace testbed {

// Element types a communicator moves and reduces.
enum class DataType : std::uint8_t { kFloat32, kFloat64, kInt32, kInt64, kUInt8, kUInt32, kUInt64 };

[[nodiscard]] constexpr std::size_t DataTypeSize(DataType type) noexcept {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
    case DataType::kUInt32: return 4;
    case DataType::kUInt64: return 8;
  }
  return 0;
}

[[nodiscard]] constexpr const char* DataTypeName(DataType type) noexcept {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
    case DataType::kUInt32: return "uint32";
    case DataType::kUInt64: return "uint64";
  }
  return "?";
}

[[nodiscard]] constexpr bool IsUnsignedInteger(DataType type) noexcept {
  return type == DataType::kUInt8 || type == DataType::kUInt32 || type == DataType::kUInt64;
}

// The DataType of a C++ element type: DataTypeOf<float>() == DataType::kFloat32.
template <typename T>
[[nodiscard]] constexpr DataType DataTypeOf() noexcept {
  if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DataType::kFloat64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DataType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DataType::kInt64;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DataType::kUInt8;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return DataType::kUInt32;
  else {
    static_assert(std::is_same_v<T, std::uint64_t>, "not a communicator element type");
    return DataType::kUInt64;
  }
}

// Element-wise reductions. kBitOr is defined for the unsigned integer types only (compressors
// combine bitmaps with it); on other types it is an InvalidArgument error.
enum class ReduceOp : std::uint8_t { kSum, kMax, kMin, kBitOr };

[[nodiscard]] constexpr const char* ReduceOpName(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kBitOr: return "bit_or";
  }
  return "?";
}

// Where an endpoint's buffers live.
enum class MemorySpace : std::uint8_t { kHost, kCuda };

// A started operation. Wait (or Test until true) exactly once to learn its outcome.
// Destroying an unfinished request waits for it (bounded by its deadline); a failure seen
// only then breaks the group.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  // Blocks until the operation has finished on this rank: its output buffers hold the result
  // and its input buffers may be reused. Returns the operation's status (see the header
  // comment for DeadlineExceeded, InvalidArgument, FailedPrecondition).
  [[nodiscard]] virtual absl::Status Wait() = 0;
  // Non-blocking: true once finished (Wait then returns at once with the status); an error
  // when the operation has already failed.
  [[nodiscard]] virtual absl::StatusOr<bool> Test() = 0;
};

using CommRequestPtr = std::unique_ptr<CommRequest>;

// One rank's endpoint on a group of ranks. Ranks are numbered 0..size()-1 within the group.
class CommGroup {
 public:
  virtual ~CommGroup() = default;

  [[nodiscard]] virtual int rank() const noexcept = 0;
  [[nodiscard]] virtual int size() const noexcept = 0;
  // The world rank (as numbered by Communicator::Connect) of each member, in group-rank order.
  [[nodiscard]] virtual const std::vector<int>& world_ranks() const noexcept = 0;
  [[nodiscard]] virtual MemorySpace memory_space() const noexcept = 0;
  // The deadline each operation gets, seconds (the communicator's `timeout_s`).
  [[nodiscard]] virtual double timeout_s() const noexcept = 0;

  // ---- Asynchronous primitives: every implementation provides these. ----
  // Counts and count arrays are copied; buffers are not. Errors known at the call (bad rank,
  // negative count, kBitOr on a signed type, broken group) come back from the call itself;
  // the others from the request.

  // recv[i] = op over members m of send_m[i], i < count. send == recv is the in-place form.
  // Every member gets bitwise the same result (a fixed reduction order per implementation).
  [[nodiscard]] virtual absl::StatusOr<CommRequestPtr> IAllReduce(const void* send, void* recv, std::int64_t count,
                                                                  DataType type, ReduceOp op) = 0;
  // Copies the root's `count` elements of `buffer` into every member's `buffer`.
  [[nodiscard]] virtual absl::StatusOr<CommRequestPtr> IBroadcast(void* buffer, std::int64_t count, DataType type,
                                                                  int root) = 0;
  // Member m contributes counts[m] elements from `send`; recv (sum of counts) receives them
  // concatenated in rank order. `send` may point at this rank's own place inside `recv`.
  [[nodiscard]] virtual absl::StatusOr<CommRequestPtr> IAllGatherV(const void* send, void* recv,
                                                                   std::span<const std::int64_t> counts,
                                                                   DataType type) = 0;
  // `send` holds sum(counts) elements on every member; this rank's recv gets counts[rank()]
  // elements: the reduction over members of its segment (segments in rank order).
  [[nodiscard]] virtual absl::StatusOr<CommRequestPtr> IReduceScatterV(const void* send, void* recv,
                                                                       std::span<const std::int64_t> counts,
                                                                       DataType type, ReduceOp op) = 0;
  // This rank sends send_counts[p] elements to each member p (segments of `send` in rank
  // order) and receives recv_counts[p] elements from each p (segments of `recv` in rank
  // order). recv_counts[p] here must equal send_counts[rank()] on p. send and recv must not
  // overlap.
  [[nodiscard]] virtual absl::StatusOr<CommRequestPtr> IAllToAllV(const void* send,
                                                                  std::span<const std::int64_t> send_counts,
                                                                  void* recv,
                                                                  std::span<const std::int64_t> recv_counts,
                                                                  DataType type) = 0;
  // Point-to-point, matched by (source, destination, tag) in posting order; tag in
  // [0, kMaxTag]. The receive's count must be at least the send's (the received count is the
  // send's). A send may finish before its receive is posted or wait for it (as in MPI):
  // exchanges in both directions need ISend/IRecv. The nccl communicator keeps NCCL's
  // rules instead: posting order only (tags do not reorder), equal counts, no self-sends, and
  // a rank's operations on one group run one at a time in posting order, a send finishing
  // only once its receive runs (so an exchange must be ordered, or use two groups).
  static constexpr int kMaxTag = 32767;
  [[nodiscard]] virtual absl::StatusOr<CommRequestPtr> ISend(const void* buffer, std::int64_t count, DataType type,
                                                             int peer, int tag) = 0;
  [[nodiscard]] virtual absl::StatusOr<CommRequestPtr> IRecv(void* buffer, std::int64_t count, DataType type,
                                                             int peer, int tag) = 0;
  // Finishes once every member has started it.
  [[nodiscard]] virtual absl::StatusOr<CommRequestPtr> IBarrier() = 0;

  // A sub-group of `members` (ranks of this group, distinct, in the new group's rank order;
  // this rank among them). Called by the members only, blocking until all of them have
  // called it (deadline as for operations). Members create the sub-groups they share in the
  // same order. The sub-group is independent of this one: its operations do not order with
  // this group's, and it may be used from another thread. Errors: InvalidArgument (bad member
  // list), DeadlineExceeded naming members that never came.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<CommGroup>> NewGroup(const std::vector<int>& members) = 0;

  // ---- Blocking forms and even splits, built on the primitives. ----

  // counts for `total` elements split over `parts`: the first total % parts get one more.
  [[nodiscard]] static std::vector<std::int64_t> EvenCounts(std::int64_t total, int parts) {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(parts), total / parts);
    for (std::int64_t i = 0; i < total % parts; ++i) ++counts[static_cast<std::size_t>(i)];
    return counts;
  }

  [[nodiscard]] absl::Status AllReduce(const void* send, void* recv, std::int64_t count, DataType type, ReduceOp op) {
    return Finish(IAllReduce(send, recv, count, type, op));
  }
  [[nodiscard]] absl::Status Broadcast(void* buffer, std::int64_t count, DataType type, int root) {
    return Finish(IBroadcast(buffer, count, type, root));
  }
  [[nodiscard]] absl::Status AllGatherV(const void* send, void* recv, std::span<const std::int64_t> counts,
                                        DataType type) {
    return Finish(IAllGatherV(send, recv, counts, type));
  }
  // Every member contributes `count` elements; recv holds size() * count.
  [[nodiscard]] absl::Status AllGather(const void* send, void* recv, std::int64_t count, DataType type) {
    const std::vector<std::int64_t> counts(static_cast<std::size_t>(size()), count);
    return AllGatherV(send, recv, counts, type);
  }
  [[nodiscard]] absl::Status ReduceScatterV(const void* send, void* recv, std::span<const std::int64_t> counts,
                                            DataType type, ReduceOp op) {
    return Finish(IReduceScatterV(send, recv, counts, type, op));
  }
  // send holds size() * count elements; recv gets this rank's reduced `count`.
  [[nodiscard]] absl::Status ReduceScatter(const void* send, void* recv, std::int64_t count, DataType type,
                                           ReduceOp op) {
    const std::vector<std::int64_t> counts(static_cast<std::size_t>(size()), count);
    return ReduceScatterV(send, recv, counts, type, op);
  }
  [[nodiscard]] absl::Status AllToAllV(const void* send, std::span<const std::int64_t> send_counts, void* recv,
                                       std::span<const std::int64_t> recv_counts, DataType type) {
    return Finish(IAllToAllV(send, send_counts, recv, recv_counts, type));
  }
  // `count` elements to and from every member.
  [[nodiscard]] absl::Status AllToAll(const void* send, void* recv, std::int64_t count, DataType type) {
    const std::vector<std::int64_t> counts(static_cast<std::size_t>(size()), count);
    return AllToAllV(send, counts, recv, counts, type);
  }
  [[nodiscard]] absl::Status Send(const void* buffer, std::int64_t count, DataType type, int peer, int tag) {
    return Finish(ISend(buffer, count, type, peer, tag));
  }
  [[nodiscard]] absl::Status Recv(void* buffer, std::int64_t count, DataType type, int peer, int tag) {
    return Finish(IRecv(buffer, count, type, peer, tag));
  }
  [[nodiscard]] absl::Status Barrier() { return Finish(IBarrier()); }

  // Typed all-reduce: AllReduce(std::span<float>(grad), ReduceOp::kSum) in place.
  template <typename T>
  [[nodiscard]] absl::Status AllReduce(std::span<T> data, ReduceOp op) {
    return AllReduce(data.data(), data.data(), static_cast<std::int64_t>(data.size()), DataTypeOf<T>(), op);
  }

 private:
  [[nodiscard]] static absl::Status Finish(absl::StatusOr<CommRequestPtr> started) {
    if (!started.ok()) return started.status();
    return (*started)->Wait();
  }
};

// Argument checks every implementation makes at the start of an operation, so that all of
// them reject the same mistakes with the same messages. `what` names the operation.
namespace comm_checks {

[[nodiscard]] inline absl::Status Count(std::int64_t count, const void* buffer, const char* what) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": negative count ", count));
  if (count > 0 && buffer == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": null buffer"));
  return absl::OkStatus();
}

[[nodiscard]] inline absl::Status Reduction(DataType type, ReduceOp op, const char* what) {
  if (op == ReduceOp::kBitOr && !IsUnsignedInteger(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": bit_or needs an unsigned integer type, not ", DataTypeName(type)));
  }
  return absl::OkStatus();
}

[[nodiscard]] inline absl::Status Rank(int rank, int size, const char* role, const char* what) {
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", role, " ", rank, " is not a rank of a group of ", size));
  }
  return absl::OkStatus();
}

[[nodiscard]] inline absl::Status Tag(int tag, const char* what) {
  if (tag < 0 || tag > CommGroup::kMaxTag) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": tag ", tag, " outside [0, ", CommGroup::kMaxTag, "]"));
  }
  return absl::OkStatus();
}

// One count per member, none negative; `buffer` may be null only when the total is zero.
[[nodiscard]] inline absl::Status Counts(std::span<const std::int64_t> counts, int size, const void* buffer,
                                         const char* what) {
  if (static_cast<int>(counts.size()) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", counts.size(), " counts for a group of ", size, " (one per member expected)"));
  }
  std::int64_t total = 0;
  for (std::int64_t c : counts) {
    if (c < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": negative count ", c));
    total += c;
  }
  return Count(total, buffer, what);
}

// Members of a new sub-group: non-empty, distinct, ranks of a group of `size`, including `rank`.
[[nodiscard]] inline absl::Status Members(const std::vector<int>& members, int size, int rank) {
  if (members.empty()) return absl::InvalidArgumentError("new_group: empty member list");
  std::vector<bool> seen(static_cast<std::size_t>(size), false);
  bool self = false;
  for (int m : members) {
    if (m < 0 || m >= size) {
      return absl::InvalidArgumentError(absl::StrCat("new_group: member ", m, " is not a rank of a group of ", size));
    }
    if (seen[static_cast<std::size_t>(m)]) {
      return absl::InvalidArgumentError(absl::StrCat("new_group: member ", m, " listed twice"));
    }
    seen[static_cast<std::size_t>(m)] = true;
    self = self || m == rank;
  }
  if (!self) {
    return absl::InvalidArgumentError(absl::StrCat("new_group: rank ", rank, " is not among the members it asks for"));
  }
  return absl::OkStatus();
}

}  // namespace comm_checks

class Communicator : public Component {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kCommunicator;

  // Joins a world of `world_size` ranks and returns the endpoints this process hosts, in rank
  // order, each on the world group:
  //   local: all world_size ranks (threads of this process; use each from its own thread);
  //   mpi:   this process's one rank; world_size must equal the MPI world size (0 = any);
  //   nccl:  one rank per GPU of this process, world_size GPUs.
  // May be called more than once; each call makes a new, independent world.
  // Errors: InvalidArgument (world_size out of range or not the launcher's), Unavailable (no
  // MPI runtime, no GPU or NCCL failure), DeadlineExceeded (a rank never joined).
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> Connect(int world_size) = 0;
  [[nodiscard]] virtual MemorySpace memory_space() const noexcept = 0;
};

}  // namespace testbed
