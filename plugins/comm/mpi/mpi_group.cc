#include "mpi_group.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mpi_runtime.h"
#include "mpi_types.h"
#include "poll.h"
#include "ring_all_reduce.h"
#include "testbed/status_macros.h"

namespace testbed::mpi {
namespace {

constexpr int kJoinTag = 2;  // on the control communicator; ArrivalTracker uses 1

// What MPI must keep until an operation finishes besides the caller's buffers.
struct Held {
  IntLayout a;
  IntLayout b;
  std::vector<unsigned char> staging;
};

bool Overlap(const void* a, std::int64_t a_bytes, const void* b, std::int64_t b_bytes) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

std::uint64_t GroupKey(const std::vector<int>& members, int nth) {
  std::uint64_t h = 1469598103934665603ull;
  for (int m : members) h = (h ^ static_cast<std::uint64_t>(m + 1)) * 1099511628211ull;
  return (h ^ static_cast<std::uint64_t>(nth)) * 1099511628211ull;
}

}  // namespace

absl::StatusOr<std::shared_ptr<GroupCore>> MpiGroup::MakeCore(MPI_Comm parent, std::vector<int> world_ranks,
                                                              double timeout_s, bool track_arrivals,
                                                              const std::string& what) {
  MPI_Comm comm = MPI_COMM_NULL, control = MPI_COMM_NULL;
  std::vector<MPI_Request> requests(2, MPI_REQUEST_NULL);
  int rc = MPI_Comm_idup(parent, &comm, &requests[0]);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_idup(parent, &control, &requests[1]);
  if (rc != MPI_SUCCESS) return MpiError(rc, absl::StrCat(what, ": MPI_Comm_idup"));
  absl::Status polled = PollUntil(requests, DeadlineAfter(timeout_s));
  if (absl::IsDeadlineExceeded(polled)) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": not every member of group {", absl::StrJoin(world_ranks, ", "),
                                                    "} joined within timeout_s = ", timeout_s, " s"));
  }
  TESTBED_RETURN_IF_ERROR(polled);
  // Errors come back as codes, never as an abort of the whole job.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  return std::make_shared<GroupCore>(comm, control, std::move(world_ranks), timeout_s, track_arrivals);
}

std::int64_t MpiGroup::NextCollective() {
  const std::int64_t seq = next_seq_++;
  core_->arrivals().Announce(seq);
  return seq;
}

absl::StatusOr<CommRequestPtr> MpiGroup::Started(const char* name, int rc, MPI_Request request,
                                                 std::shared_ptr<void> buffers, std::int64_t seq) {
  if (rc != MPI_SUCCESS) {
    absl::Status error = MpiError(rc, absl::StrCat(name, " #", seq, " on group ", core_->name()));
    core_->Break(error);  // the other members are inside the collective now; it cannot be undone
    return error;
  }
  return std::make_unique<MpiRequest>(core_, OpLabel{name, seq, -1, -1}, std::vector<MPI_Request>{request},
                                      std::move(buffers));
}

absl::StatusOr<CommRequestPtr> MpiGroup::IAllReduce(const void* send, void* recv, std::int64_t count, DataType type,
                                                    ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, send, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, recv, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "all_reduce"));
  TESTBED_ASSIGN_OR_RETURN(int n, IntCount(count, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  const std::int64_t seq = NextCollective();
  if (all_reduce_.algorithm == AllReduceSettings::Algorithm::kRing) {
    return RingAllReduce::Start(core_, seq, send, recv, count, type, op, all_reduce_.segment_bytes);
  }
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, n, ToMpi(type), ToMpi(op), core_->comm(),
                                &request);
  return Started("all_reduce", rc, request, nullptr, seq);
}

absl::StatusOr<CommRequestPtr> MpiGroup::IBroadcast(void* buffer, std::int64_t count, DataType type, int root) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "broadcast"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(root, size(), "root", "broadcast"));
  TESTBED_ASSIGN_OR_RETURN(int n, IntCount(count, "broadcast"));
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  const std::int64_t seq = NextCollective();
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ibcast(buffer, n, ToMpi(type), root, core_->comm(), &request);
  return Started("broadcast", rc, request, nullptr, seq);
}

absl::StatusOr<CommRequestPtr> MpiGroup::IAllGatherV(const void* send, void* recv,
                                                     std::span<const std::int64_t> counts, DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), recv, "all_gather_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(counts[static_cast<size_t>(rank())], send, "all_gather_v"));
  auto held = std::make_shared<Held>();
  TESTBED_ASSIGN_OR_RETURN(held->a, IntCounts(counts, "all_gather_v"));
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  const auto esize = static_cast<std::int64_t>(DataTypeSize(type));
  const auto r = static_cast<size_t>(rank());
  const void* mine = static_cast<unsigned char*>(recv) + held->a.displs[r] * esize;
  const void* sbuf = send == mine ? MPI_IN_PLACE : send;
  const std::int64_t seq = NextCollective();
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgatherv(sbuf, held->a.counts[r], ToMpi(type), recv, held->a.counts.data(),
                                 held->a.displs.data(), ToMpi(type), core_->comm(), &request);
  return Started("all_gather_v", rc, request, held, seq);
}

absl::StatusOr<CommRequestPtr> MpiGroup::IReduceScatterV(const void* send, void* recv,
                                                         std::span<const std::int64_t> counts, DataType type,
                                                         ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), send, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(counts[static_cast<size_t>(rank())], recv, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "reduce_scatter_v"));
  auto held = std::make_shared<Held>();
  TESTBED_ASSIGN_OR_RETURN(held->a, IntCounts(counts, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  const auto esize = static_cast<std::int64_t>(DataTypeSize(type));
  std::int64_t total = 0;
  for (std::int64_t c : counts) total += c;
  const void* sbuf = send;
  // MPI forbids the output overlapping the input (an in-place segment, say): stage a copy.
  if (Overlap(send, total * esize, recv, counts[static_cast<size_t>(rank())] * esize)) {
    held->staging.resize(static_cast<size_t>(total * esize));
    std::memcpy(held->staging.data(), send, held->staging.size());
    sbuf = held->staging.data();
  }
  const std::int64_t seq = NextCollective();
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ireduce_scatter(sbuf, recv, held->a.counts.data(), ToMpi(type), ToMpi(op), core_->comm(),
                                     &request);
  return Started("reduce_scatter_v", rc, request, held, seq);
}

absl::StatusOr<CommRequestPtr> MpiGroup::IAllToAllV(const void* send, std::span<const std::int64_t> send_counts,
                                                    void* recv, std::span<const std::int64_t> recv_counts,
                                                    DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(send_counts, size(), send, "all_to_all_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(recv_counts, size(), recv, "all_to_all_v"));
  auto held = std::make_shared<Held>();
  TESTBED_ASSIGN_OR_RETURN(held->a, IntCounts(send_counts, "all_to_all_v"));
  TESTBED_ASSIGN_OR_RETURN(held->b, IntCounts(recv_counts, "all_to_all_v"));
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  const std::int64_t seq = NextCollective();
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ialltoallv(send, held->a.counts.data(), held->a.displs.data(), ToMpi(type), recv,
                                held->b.counts.data(), held->b.displs.data(), ToMpi(type), core_->comm(), &request);
  return Started("all_to_all_v", rc, request, held, seq);
}

absl::StatusOr<CommRequestPtr> MpiGroup::IBarrier() {
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  const std::int64_t seq = NextCollective();
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ibarrier(core_->comm(), &request);
  return Started("barrier", rc, request, nullptr, seq);
}

absl::StatusOr<CommRequestPtr> MpiGroup::ISend(const void* buffer, std::int64_t count, DataType type, int peer,
                                               int tag) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "send"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", "send"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, "send"));
  TESTBED_ASSIGN_OR_RETURN(int n, IntCount(count, "send"));
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(buffer, n, ToMpi(type), peer, tag, core_->comm(), &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Isend");
  return std::make_unique<MpiRequest>(core_, OpLabel{"send", -1, peer, tag}, std::vector<MPI_Request>{request},
                                      nullptr);
}

absl::StatusOr<CommRequestPtr> MpiGroup::IRecv(void* buffer, std::int64_t count, DataType type, int peer, int tag) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "recv"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", "recv"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, "recv"));
  TESTBED_ASSIGN_OR_RETURN(int n, IntCount(count, "recv"));
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Irecv(buffer, n, ToMpi(type), peer, tag, core_->comm(), &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Irecv");
  return std::make_unique<MpiRequest>(core_, OpLabel{"recv", -1, peer, tag}, std::vector<MPI_Request>{request},
                                      nullptr);
}

absl::Status MpiGroup::Handshake(const std::vector<int>& members, std::uint64_t key) {
  struct Notes {
    std::uint64_t out = 0;
    std::vector<std::uint64_t> in;
  };
  auto notes = std::make_shared<Notes>();
  notes->out = key;
  std::vector<int> others;
  for (int m : members) {
    if (m != rank()) others.push_back(m);
  }
  notes->in.assign(others.size(), 0);
  std::vector<MPI_Request> requests(2 * others.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < others.size(); ++i) {
    MPI_Irecv(&notes->in[i], 1, MPI_UINT64_T, others[i], kJoinTag, core_->control(), &requests[2 * i]);
    MPI_Isend(&notes->out, 1, MPI_UINT64_T, others[i], kJoinTag, core_->control(), &requests[2 * i + 1]);
  }
  absl::Status polled = PollUntil(requests, DeadlineAfter(timeout_s()));
  if (absl::IsDeadlineExceeded(polled)) {
    std::vector<int> absent;
    for (size_t i = 0; i < others.size(); ++i) {
      if (requests[2 * i] != MPI_REQUEST_NULL) absent.push_back(others[i]);
    }
    for (MPI_Request& r : requests) {
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    }
    std::vector<MPI_Request> pending = requests;
    // Requests that finished are freed by MPI (null in `pending`); only the others are kept.
    if (!PollUntil(pending, DeadlineAfter(0.2)).ok()) core_->Adopt(std::move(pending), notes);
    return absl::DeadlineExceededError(absl::StrCat("new_group of ranks {", absl::StrJoin(members, ", "), "}: rank(s) ",
                                                    absl::StrJoin(absent, ", "), " did not join within timeout_s = ",
                                                    timeout_s(), " s"));
  }
  TESTBED_RETURN_IF_ERROR(polled);
  for (size_t i = 0; i < others.size(); ++i) {
    if (notes->in[i] != key) {
      return absl::InvalidArgumentError(absl::StrCat(
          "new_group of ranks {", absl::StrJoin(members, ", "), "}: rank ", others[i],
          " is making another group at the same time (members must create the groups they share in the same order)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CommGroup>> MpiGroup::NewGroup(const std::vector<int>& members) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Members(members, size(), rank()));
  TESTBED_RETURN_IF_ERROR(core_->CheckUsable());
  const int nth = groups_created_[members]++;
  const std::uint64_t key = GroupKey(members, nth);
  TESTBED_RETURN_IF_ERROR(Handshake(members, key));
  // Everyone is here, so the blocking creation below returns promptly.
  MPI_Group parent_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm_group(core_->comm(), &parent_group);
  MPI_Group_incl(parent_group, static_cast<int>(members.size()), members.data(), &group);
  MPI_Comm created = MPI_COMM_NULL;
  const int rc = MPI_Comm_create_group(core_->comm(), group, static_cast<int>(key % 30000), &created);
  MPI_Group_free(&group);
  MPI_Group_free(&parent_group);
  if (rc != MPI_SUCCESS) return MpiError(rc, "new_group: MPI_Comm_create_group");
  std::vector<int> world;
  for (int m : members) world.push_back(world_ranks()[static_cast<size_t>(m)]);
  auto core = MakeCore(created, std::move(world), timeout_s(), core_->arrivals().enabled(), "new_group");
  MPI_Comm_free(&created);
  if (!core.ok()) return core.status();
  return std::unique_ptr<CommGroup>(std::make_unique<MpiGroup>(std::move(*core), all_reduce_));
}

}  // namespace testbed::mpi
