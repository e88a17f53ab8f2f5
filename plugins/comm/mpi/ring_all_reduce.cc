#include "ring_all_reduce.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "mpi_runtime.h"
#include "mpi_types.h"
#include "poll.h"
#include "testbed/reduce_elements.h"

namespace testbed::mpi {

absl::StatusOr<CommRequestPtr> RingAllReduce::Start(std::shared_ptr<GroupCore> core, std::int64_t seq,
                                                    const void* send, void* recv, std::int64_t count, DataType type,
                                                    ReduceOp op, std::int64_t segment_bytes) {
  std::unique_ptr<RingAllReduce> ring(
      new RingAllReduce(std::move(core), seq, send, recv, count, type, op, segment_bytes));
  const int p = ring->core_->size();
  if (p == 1) {
    if (send != recv && count > 0) std::memcpy(recv, send, static_cast<size_t>(count * ring->esize_));
    ring->Finish(absl::OkStatus());
    return CommRequestPtr(std::move(ring));
  }
  // Step 0 sends this member's own chunk, straight from its input.
  std::vector<Segment> first;
  ring->AppendSegments(0, ring->core_->rank(), first);
  absl::Status started = absl::OkStatus();
  for (const Segment& s : first) {
    started = ring->SendSegment(s, ring->send_ + s.offset * ring->esize_, /*reads_recv=*/send == recv);
    if (!started.ok()) break;
  }
  if (started.ok()) started = ring->PostReceives();
  if (!started.ok()) {
    ring->core_->Break(started);  // the neighbours are inside the operation now
    return started;
  }
  ring->core_->Register(ring.get());
  return CommRequestPtr(std::move(ring));
}

RingAllReduce::RingAllReduce(std::shared_ptr<GroupCore> core, std::int64_t seq, const void* send, void* recv,
                             std::int64_t count, DataType type, ReduceOp op, std::int64_t segment_bytes)
    : core_(std::move(core)),
      seq_(seq),
      send_(static_cast<const unsigned char*>(send)),
      recv_(static_cast<unsigned char*>(recv)),
      type_(type),
      op_(op),
      esize_(static_cast<std::int64_t>(DataTypeSize(type))),
      segment_elements_(std::max<std::int64_t>(1, segment_bytes / static_cast<std::int64_t>(DataTypeSize(type)))),
      tag_(kFirstTag + static_cast<int>(seq % kTagSpan)),
      slots_(std::make_shared<std::vector<unsigned char>>()) {
  const int p = core_->size();
  offsets_.assign(static_cast<size_t>(p) + 1, 0);
  for (int c = 0; c < p; ++c) {
    offsets_[static_cast<size_t>(c) + 1] = offsets_[static_cast<size_t>(c)] + count / p + (c < count % p ? 1 : 0);
  }
  for (int step = 0; step < 2 * (p - 1); ++step) AppendSegments(step, ChunkReceivedAt(step), incoming_order_);
  slot_elements_ = std::min(segment_elements_, count / p + 1);
  slots_->resize(static_cast<size_t>(kWindow * slot_elements_ * esize_));
  for (int s = kWindow - 1; s >= 0; --s) free_slots_.push_back(s);
}

RingAllReduce::~RingAllReduce() {
  if (!finished_ && MpiUsable()) (void)Wait();
}

int RingAllReduce::ChunkReceivedAt(int step) const noexcept {
  const int p = core_->size();
  const int me = core_->rank();
  // Reduce-scatter step t adds chunk me-t-1 into this member's copy; all-gather step k
  // stores the finished chunk me-k. Either way it is the chunk sent on at the next step.
  const int back = step < p - 1 ? step + 1 : step - (p - 1);
  return ((me - back) % p + p) % p;
}

void RingAllReduce::AppendSegments(int step, int chunk, std::vector<Segment>& out) const {
  const std::int64_t begin = offsets_[static_cast<size_t>(chunk)];
  const std::int64_t end = offsets_[static_cast<size_t>(chunk) + 1];
  for (std::int64_t at = begin; at < end; at += segment_elements_) {
    out.push_back(Segment{step, chunk, at, static_cast<int>(std::min(segment_elements_, end - at))});
  }
}

std::string RingAllReduce::Describe() const {
  return absl::StrCat("all_reduce #", seq_, " (ring) on group ", core_->name());
}

absl::Status RingAllReduce::Error(int rc, const char* call) const {
  return MpiError(rc, absl::StrCat(Describe(), ": ", call));
}

absl::Status RingAllReduce::SendSegment(const Segment& segment, const void* from, bool reads_recv) {
  const int right = (core_->rank() + 1) % core_->size();
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(from, segment.count, ToMpi(type_), right, tag_, core_->control(), &request);
  if (rc != MPI_SUCCESS) return Error(rc, "MPI_Isend");
  if (reads_recv) region_sends_[segment.offset] = sends_.size();
  sends_.push_back(request);
  return absl::OkStatus();
}

absl::Status RingAllReduce::PostReceives() {
  const int p = core_->size();
  const int left = (core_->rank() + p - 1) % p;
  while (posted_.size() < static_cast<size_t>(kWindow) && next_to_post_ < incoming_order_.size()) {
    const Segment& s = incoming_order_[next_to_post_];
    const bool reducing = s.step < p - 1;
    void* into = nullptr;
    int slot = -1;
    if (reducing) {
      slot = free_slots_.back();
      into = slots_->data() + slot * slot_elements_ * esize_;
    } else {
      // An all-gather segment lands in place. MPI forbids receiving into memory that an
      // unfinished send still reads (the earlier send of this region's partial sum, or of the
      // input in place): wait for that send first.
      if (auto it = region_sends_.find(s.offset); it != region_sends_.end()) {
        int done = 0;
        const int rc = MPI_Test(&sends_[it->second], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return Error(rc, "MPI_Test");
        if (!done) return absl::OkStatus();
        region_sends_.erase(it);
      }
      into = recv_ + s.offset * esize_;
    }
    Posted posted{s, MPI_REQUEST_NULL, slot};
    const int rc = MPI_Irecv(into, s.count, ToMpi(type_), left, tag_, core_->control(), &posted.request);
    if (rc != MPI_SUCCESS) return Error(rc, "MPI_Irecv");
    if (reducing) free_slots_.pop_back();
    posted_.push_back(posted);
    ++next_to_post_;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RingAllReduce::Advance() {
  if (finished_) {
    if (!status_.ok()) return status_;
    return true;
  }
  const int p = core_->size();
  const int last_step = 2 * (p - 1) - 1;
  absl::Status failed = PostReceives();
  while (failed.ok() && !posted_.empty()) {
    Posted& head = posted_.front();
    int done = 0;
    const int rc = MPI_Test(&head.request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      failed = Error(rc, "MPI_Test");
      break;
    }
    if (!done) break;
    const Segment s = head.segment;
    unsigned char* region = recv_ + s.offset * esize_;
    const auto bytes = static_cast<size_t>(s.count * esize_);
    if (s.step < p - 1) {
      // This member's input combined with the partial sum from the left, while both are in cache.
      if (send_ != recv_) std::memcpy(region, send_ + s.offset * esize_, bytes);
      ReduceElements(region, slots_->data() + head.slot * slot_elements_ * esize_, s.count, type_, op_);
      free_slots_.push_back(head.slot);
    }
    posted_.pop_front();
    if (s.step < last_step) failed = SendSegment(Segment{s.step + 1, s.chunk, s.offset, s.count}, region, true);
    if (failed.ok()) failed = PostReceives();
  }
  if (!failed.ok()) {
    core_->Break(failed);
    Finish(failed);
    return status_;
  }
  if (!posted_.empty() || next_to_post_ < incoming_order_.size()) return false;
  int sent = 0;
  const int rc = MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &sent, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    absl::Status error = Error(rc, "MPI_Testall");
    core_->Break(error);
    Finish(error);
    return status_;
  }
  if (!sent) return false;
  Finish(absl::OkStatus());
  return true;
}

absl::StatusOr<bool> RingAllReduce::Test() {
  core_->ProgressOthers(this);
  return Advance();
}

absl::Status RingAllReduce::Wait() {
  const Clock::time_point deadline = DeadlineAfter(core_->timeout_s());
  const Clock::time_point pulse_from = Clock::now() + std::chrono::milliseconds(100);
  Backoff backoff;
  for (;;) {
    core_->ProgressOthers(this);
    absl::StatusOr<bool> done = Advance();
    if (!done.ok() || *done) return status_;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      Finish(TimedOut());
      return status_;
    }
    if (now >= pulse_from) core_->arrivals().Pulse();  // see ArrivalTracker
    backoff.Pause();
  }
}

void RingAllReduce::Finish(absl::Status status) {
  if (!finished_) core_->Unregister(this);
  finished_ = true;
  status_ = std::move(status);
}

absl::Status RingAllReduce::TimedOut() {
  // Withdraw what MPI still can; what it cannot stays alive, with the incoming slots, until
  // MPI_Finalize.
  std::vector<MPI_Request> pending = sends_;
  for (Posted& posted : posted_) pending.push_back(posted.request);
  for (MPI_Request& r : pending) {
    if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
  }
  if (!PollUntil(pending, DeadlineAfter(0.2)).ok()) core_->Adopt(std::move(pending), slots_);
  sends_.clear();
  posted_.clear();
  return core_->CollectiveTimedOut(Describe(), seq_);
}

}  // namespace testbed::mpi
