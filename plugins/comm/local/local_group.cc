#include "local_group.h"

#include "absl/strings/str_cat.h"
#include "collective_engine.h"
#include "collective_request.h"
#include "testbed/status_macros.h"
#include "transfer_request.h"

namespace testbed::local {
namespace {

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

LocalGroup::LocalGroup(std::shared_ptr<GroupState> state, int rank) : state_(std::move(state)), rank_(rank) {}

absl::StatusOr<CommRequestPtr> LocalGroup::StartCollective(CollectiveArgs args) {
  TESTBED_RETURN_IF_ERROR(state_->rendezvous.CheckUsable());
  auto done = std::make_shared<Completion>();
  const std::int64_t seq = next_seq_++;
  worker_.Post([state = state_, rank = rank_, seq, args = std::move(args), done] {
    const std::string what = absl::StrCat(CollectiveKindName(args.kind), " #", seq);
    // The deadline runs from when the operation starts on this rank's stream.
    auto all = state->rendezvous.Arrive(rank, seq, args, what, Clock::now() + Seconds(state->timeout_s));
    if (!all.ok()) {
      done->Finish(all.status());
      return;
    }
    absl::Status agreed = CheckAgreement(*all);
    if (agreed.ok()) DoShare(rank, *all);
    absl::Status left = state->rendezvous.Depart(rank, seq, what, Clock::now() + Seconds(state->timeout_s));
    if (!agreed.ok()) {
      agreed = absl::InvalidArgumentError(absl::StrCat(what, " on group ", state->rendezvous.group_name(), ": ",
                                                       agreed.message()));
      state->rendezvous.Break(agreed);
      done->Finish(agreed);
      return;
    }
    done->Finish(left);
  });
  return std::make_unique<CollectiveRequest>(std::move(done));
}

absl::StatusOr<CommRequestPtr> LocalGroup::IAllReduce(const void* send, void* recv, std::int64_t count, DataType type,
                                                      ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, send, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, recv, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "all_reduce"));
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllReduce;
  a.type = type;
  a.op = op;
  a.count = count;
  a.send = send;
  a.recv = recv;
  return StartCollective(std::move(a));
}

absl::StatusOr<CommRequestPtr> LocalGroup::IBroadcast(void* buffer, std::int64_t count, DataType type, int root) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "broadcast"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(root, size(), "root", "broadcast"));
  CollectiveArgs a;
  a.kind = CollectiveKind::kBroadcast;
  a.type = type;
  a.count = count;
  a.root = root;
  a.recv = buffer;
  return StartCollective(std::move(a));
}

absl::StatusOr<CommRequestPtr> LocalGroup::IAllGatherV(const void* send, void* recv,
                                                       std::span<const std::int64_t> counts, DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), recv, "all_gather_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(counts[static_cast<size_t>(rank_)], send, "all_gather_v"));
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllGatherV;
  a.type = type;
  a.send = send;
  a.recv = recv;
  a.counts.assign(counts.begin(), counts.end());
  return StartCollective(std::move(a));
}

absl::StatusOr<CommRequestPtr> LocalGroup::IReduceScatterV(const void* send, void* recv,
                                                           std::span<const std::int64_t> counts, DataType type,
                                                           ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), send, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(counts[static_cast<size_t>(rank_)], recv, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "reduce_scatter_v"));
  CollectiveArgs a;
  a.kind = CollectiveKind::kReduceScatterV;
  a.type = type;
  a.op = op;
  a.send = send;
  a.recv = recv;
  a.counts.assign(counts.begin(), counts.end());
  return StartCollective(std::move(a));
}

absl::StatusOr<CommRequestPtr> LocalGroup::IAllToAllV(const void* send, std::span<const std::int64_t> send_counts,
                                                      void* recv, std::span<const std::int64_t> recv_counts,
                                                      DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(send_counts, size(), send, "all_to_all_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(recv_counts, size(), recv, "all_to_all_v"));
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllToAllV;
  a.type = type;
  a.send = send;
  a.recv = recv;
  a.counts.assign(send_counts.begin(), send_counts.end());
  a.recv_counts.assign(recv_counts.begin(), recv_counts.end());
  return StartCollective(std::move(a));
}

absl::StatusOr<CommRequestPtr> LocalGroup::IBarrier() {
  CollectiveArgs a;
  a.kind = CollectiveKind::kBarrier;
  return StartCollective(std::move(a));
}

absl::StatusOr<CommRequestPtr> LocalGroup::StartTransfer(bool is_send, const void* send, void* recv,
                                                         std::int64_t count, DataType type, int peer, int tag) {
  const char* what = is_send ? "send" : "recv";
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, is_send ? send : recv, what));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", what));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, what));
  auto t = std::make_shared<Transfer>();
  t->source = is_send ? rank_ : peer;
  t->destination = is_send ? peer : rank_;
  t->tag = tag;
  t->type = type;
  t->count = count;
  t->send = send;
  t->recv = recv;
  const Clock::time_point started = Clock::now();
  state_->mailbox.Post(t, is_send);
  return std::make_unique<TransferRequest>(state_, std::move(t), is_send, started);
}

absl::StatusOr<CommRequestPtr> LocalGroup::ISend(const void* buffer, std::int64_t count, DataType type, int peer,
                                                 int tag) {
  return StartTransfer(true, buffer, nullptr, count, type, peer, tag);
}

absl::StatusOr<CommRequestPtr> LocalGroup::IRecv(void* buffer, std::int64_t count, DataType type, int peer, int tag) {
  return StartTransfer(false, nullptr, buffer, count, type, peer, tag);
}

absl::StatusOr<std::unique_ptr<CommGroup>> LocalGroup::NewGroup(const std::vector<int>& members) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Members(members, size(), rank_));
  const int nth = groups_created_[members]++;
  TESTBED_ASSIGN_OR_RETURN(std::shared_ptr<GroupState> child,
                           state_->subgroups.Join(rank_, members, nth, state_->world_ranks, state_->timeout_s,
                                                  Clock::now() + Seconds(state_->timeout_s)));
  int index = 0;
  while (members[static_cast<size_t>(index)] != rank_) ++index;
  return std::unique_ptr<CommGroup>(std::make_unique<LocalGroup>(std::move(child), index));
}

}  // namespace testbed::local
