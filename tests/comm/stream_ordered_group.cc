#include "stream_ordered_group.h"

#include <array>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::testing {
namespace {

// Messages on the wrapped group: the data direction carries a header then the data on one
// tag, the acknowledgement goes back on another, so that posting order alone pairs them.
constexpr int kDataTag = 0;
constexpr int kAckTag = 1;

}  // namespace

struct StreamOrderedGroup::Done {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  absl::Status status;

  void Set(absl::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    finished = true;
    cv.notify_all();
  }
};

class StreamOrderedGroup::Request final : public CommRequest {
 public:
  Request(std::shared_ptr<Done> done, double timeout_s) : done_(std::move(done)), timeout_s_(timeout_s) {}
  // The stream may still use the caller's buffers: wait for it, as MPI and NCCL requests do.
  ~Request() override { (void)Wait(); }

  absl::Status Wait() override {
    std::unique_lock<std::mutex> lock(done_->mu);
    const bool finished = done_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s_ + 1.0),
                                             [&] { return done_->finished; });
    if (!finished) {
      return absl::DeadlineExceededError("stream-ordered operation did not finish: its stream is stuck "
                                         "(it would hang under NCCL)");
    }
    return done_->status;
  }
  absl::StatusOr<bool> Test() override {
    std::lock_guard<std::mutex> lock(done_->mu);
    if (!done_->finished) return false;
    if (!done_->status.ok()) return done_->status;
    return true;
  }

 private:
  std::shared_ptr<Done> done_;
  double timeout_s_;
};

StreamOrderedGroup::StreamOrderedGroup(std::unique_ptr<CommGroup> inner)
    : inner_(std::move(inner)), stream_([this] { RunStream(); }) {}

StreamOrderedGroup::~StreamOrderedGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  stream_.join();
}

int StreamOrderedGroup::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

void StreamOrderedGroup::RunStream() {
  for (;;) {
    std::pair<std::function<absl::Status()>, std::shared_ptr<Done>> next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      next = std::move(queue_.front());
      queue_.pop_front();
      ++started_;
    }
    // After a failure the stream stays stopped, as an NCCL communicator is aborted after an
    // error or a timeout: later operations fail at once instead of running on.
    if (broken_.ok()) {
      broken_ = next.first();
      next.second->Set(broken_);
    } else {
      next.second->Set(absl::FailedPreconditionError(
          absl::StrCat("stream-ordered group stopped by an earlier error: ", broken_.message())));
    }
  }
}

CommRequestPtr StreamOrderedGroup::Enqueue(std::function<absl::Status()> op) {
  auto done = std::make_shared<Done>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(op), done);
  }
  wake_.notify_all();
  return std::make_unique<Request>(std::move(done), inner_->timeout_s());
}

absl::StatusOr<CommRequestPtr> StreamOrderedGroup::IAllReduce(const void* send, void* recv, std::int64_t count,
                                                              DataType type, ReduceOp op) {
  // Errors known at the call come back from it, as with every communicator.
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, send, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, recv, "all_reduce"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "all_reduce"));
  return Enqueue([=, this] { return inner_->AllReduce(send, recv, count, type, op); });
}

absl::StatusOr<CommRequestPtr> StreamOrderedGroup::IBroadcast(void* buffer, std::int64_t count, DataType type,
                                                              int root) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "broadcast"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(root, size(), "root", "broadcast"));
  return Enqueue([=, this] { return inner_->Broadcast(buffer, count, type, root); });
}

absl::StatusOr<CommRequestPtr> StreamOrderedGroup::IAllGatherV(const void* send, void* recv,
                                                               std::span<const std::int64_t> counts, DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), recv, "all_gather_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(counts[static_cast<size_t>(rank())], send, "all_gather_v"));
  std::vector<std::int64_t> copied(counts.begin(), counts.end());
  return Enqueue([=, this] { return inner_->AllGatherV(send, recv, copied, type); });
}

absl::StatusOr<CommRequestPtr> StreamOrderedGroup::IReduceScatterV(const void* send, void* recv,
                                                                   std::span<const std::int64_t> counts, DataType type,
                                                                   ReduceOp op) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(counts, size(), send, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(counts[static_cast<size_t>(rank())], recv, "reduce_scatter_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Reduction(type, op, "reduce_scatter_v"));
  std::vector<std::int64_t> copied(counts.begin(), counts.end());
  return Enqueue([=, this] { return inner_->ReduceScatterV(send, recv, copied, type, op); });
}

absl::StatusOr<CommRequestPtr> StreamOrderedGroup::IAllToAllV(const void* send,
                                                              std::span<const std::int64_t> send_counts, void* recv,
                                                              std::span<const std::int64_t> recv_counts,
                                                              DataType type) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(send_counts, size(), send, "all_to_all_v"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Counts(recv_counts, size(), recv, "all_to_all_v"));
  std::vector<std::int64_t> sc(send_counts.begin(), send_counts.end()), rc(recv_counts.begin(), recv_counts.end());
  return Enqueue([=, this] { return inner_->AllToAllV(send, sc, recv, rc, type); });
}

absl::StatusOr<CommRequestPtr> StreamOrderedGroup::ISend(const void* buffer, std::int64_t count, DataType type,
                                                         int peer, int tag) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "send"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", "send"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, "send"));
  return Enqueue([=, this]() -> absl::Status {
    const std::array<std::int64_t, 2> header{tag, count};
    if (absl::Status s = inner_->Send(header.data(), 2, DataType::kInt64, peer, kDataTag); !s.ok()) return s;
    if (absl::Status s = inner_->Send(buffer, count, type, peer, kDataTag); !s.ok()) return s;
    // Finished only once the peer's stream has run the matching receive.
    std::int64_t ack = 0;
    return inner_->Recv(&ack, 1, DataType::kInt64, peer, kAckTag);
  });
}

absl::StatusOr<CommRequestPtr> StreamOrderedGroup::IRecv(void* buffer, std::int64_t count, DataType type, int peer,
                                                         int tag) {
  TESTBED_RETURN_IF_ERROR(comm_checks::Count(count, buffer, "recv"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Rank(peer, size(), "peer", "recv"));
  TESTBED_RETURN_IF_ERROR(comm_checks::Tag(tag, "recv"));
  return Enqueue([=, this]() -> absl::Status {
    std::array<std::int64_t, 2> header{};
    if (absl::Status s = inner_->Recv(header.data(), 2, DataType::kInt64, peer, kDataTag); !s.ok()) return s;
    if (header[0] != tag || header[1] != count) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stream-ordered recv from rank ", peer, " (tag ", tag, ", count ", count, ") would be paired by NCCL with ",
          "that rank's next send (tag ", header[0], ", count ", header[1], ")"));
    }
    if (absl::Status s = inner_->Recv(buffer, count, type, peer, kDataTag); !s.ok()) return s;
    const std::int64_t ack = 1;
    return inner_->Send(&ack, 1, DataType::kInt64, peer, kAckTag);
  });
}

absl::StatusOr<CommRequestPtr> StreamOrderedGroup::IBarrier() {
  return Enqueue([this] { return inner_->Barrier(); });
}

absl::StatusOr<std::unique_ptr<CommGroup>> StreamOrderedGroup::NewGroup(const std::vector<int>& members) {
  absl::StatusOr<std::unique_ptr<CommGroup>> made = inner_->NewGroup(members);
  if (!made.ok()) return made.status();
  return std::unique_ptr<CommGroup>(std::make_unique<StreamOrderedGroup>(std::move(*made)));
}

std::vector<std::unique_ptr<CommGroup>> StreamOrdered(std::vector<std::unique_ptr<CommGroup>> endpoints) {
  std::vector<std::unique_ptr<CommGroup>> wrapped;
  for (auto& e : endpoints) wrapped.push_back(std::make_unique<StreamOrderedGroup>(std::move(e)));
  return wrapped;
}

}  // namespace testbed::testing
