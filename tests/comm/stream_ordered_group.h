// NCCL's ordering rules on top of a host communicator, for checking on the CPU that code
// which will drive NCCL (the executor over `nccl`) cannot deadlock there. A StreamOrderedGroup
// wraps one endpoint and gives it what an NCCL communicator's CUDA stream imposes:
//
// - One stream per endpoint: operations run one at a time, in the order they were issued;
//   a request finishes when its operation has run. Each NewGroup is a new communicator with a
//   stream of its own (as with NCCL, streams of different communicators run concurrently).
// - Rendezvous: a send runs until the peer's stream runs the matching receive (ncclSend is
//   "blocking for the GPU"), so two ranks whose streams both start with a send to each other
//   hang, as they would under NCCL.
// - Sends and receives between two ranks pair in posting order; NCCL has no tags. A pair whose
//   tags or counts differ fails with an error naming both (NCCL would pair them silently).
//
// A hang surfaces as DeadlineExceeded from the request after the wrapped group's timeout_s;
// after any failure the endpoint's later operations fail at once (NCCL aborts the communicator).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "testbed/communicator.h"

namespace testbed::testing {

class StreamOrderedGroup final : public CommGroup {
 public:
  explicit StreamOrderedGroup(std::unique_ptr<CommGroup> inner);
  // Lets queued operations run to their end (or their deadline), then stops the stream.
  ~StreamOrderedGroup() override;

  [[nodiscard]] int rank() const noexcept override { return inner_->rank(); }
  [[nodiscard]] int size() const noexcept override { return inner_->size(); }
  [[nodiscard]] const std::vector<int>& world_ranks() const noexcept override { return inner_->world_ranks(); }
  [[nodiscard]] MemorySpace memory_space() const noexcept override { return inner_->memory_space(); }
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
  // Made on the calling thread (as ncclCommInitRank), then given its own stream.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommGroup>> NewGroup(const std::vector<int>& members) override;

  // Operations that have started running on this endpoint's stream, in order (for tests of
  // the emulation itself).
  [[nodiscard]] int started() const;

 private:
  struct Done;
  class Request;

  // Queues `op` on the stream.
  [[nodiscard]] CommRequestPtr Enqueue(std::function<absl::Status()> op);
  void RunStream();

  std::unique_ptr<CommGroup> inner_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<std::function<absl::Status()>, std::shared_ptr<Done>>> queue_;
  bool stopping_ = false;
  int started_ = 0;
  absl::Status broken_;  // the first failure on the stream (only the stream thread touches it)
  std::thread stream_;
};

// Wraps every endpoint.
[[nodiscard]] std::vector<std::unique_ptr<CommGroup>> StreamOrdered(std::vector<std::unique_ptr<CommGroup>> endpoints);

}  // namespace testbed::testing
