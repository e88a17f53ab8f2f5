// The mpi communicator's own all-reduce (`all_reduce = "ring"`): the bandwidth-optimal ring,
// a reduce-scatter of p-1 steps then an all-gather of p-1 steps over MPI point-to-point.
// Each member sends and receives 2(p-1)/p of the buffer (a recursive-doubling all-reduce
// moves the whole buffer per step), and the algorithm is the one the simulator's ring
// collective models, so measured and predicted times compare like with like.
//
// The buffer is cut into p chunks (chunk c reduced along the ring starting at member c; it
// ends fully reduced on member c-1 mod p, which sends it round unchanged, so every member gets
// bitwise the same result), and each chunk into segments of `segment_bytes`. What a member
// receives at step t is what it sends at step t+1, so it streams segment by segment: a
// segment arrives from the left, is reduced with this member's input (reduce-scatter steps)
// while still in cache, and goes on to the right at once, overlapping the next segment's
// transfer. A few receives are kept posted ahead. The operation advances only when a ring
// operation of the group is tested or waited on (each such call advances all of them).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <mpi.h>

#include "absl/status/statusor.h"
#include "group_core.h"
#include "testbed/communicator.h"

namespace testbed::mpi {

class RingAllReduce final : public CommRequest, public Progressing {
 public:
  // Starts the operation numbered `seq` in the group (already announced). `recv` must hold
  // `count` elements; send == recv is the in-place form. The arguments are checked by the
  // caller; `segment_bytes` > 0.
  [[nodiscard]] static absl::StatusOr<CommRequestPtr> Start(std::shared_ptr<GroupCore> core, std::int64_t seq,
                                                            const void* send, void* recv, std::int64_t count,
                                                            DataType type, ReduceOp op, std::int64_t segment_bytes);
  // Waits for an unfinished operation (bounded by the deadline).
  ~RingAllReduce() override;

  [[nodiscard]] absl::Status Wait() override;
  [[nodiscard]] absl::StatusOr<bool> Test() override;
  // Advances this operation on behalf of another one's wait (GroupCore::ProgressOthers).
  void Progress() override { (void)Advance(); }

  // Message tags on the group's control communicator: kFirstTag + seq modulo kTagSpan, so that
  // concurrent all-reduces of one group never take each other's messages. Within one
  // operation MPI's non-overtaking rule keeps a neighbour's segments in order.
  static constexpr int kFirstTag = 16;
  static constexpr int kTagSpan = 16000;
  // Receives posted ahead of the one being waited for.
  static constexpr int kWindow = 4;

 private:
  struct Segment {
    int step = 0;             // 0 .. 2(p-1)-1; below p-1: reduce-scatter
    int chunk = 0;
    std::int64_t offset = 0;  // elements from the start of the buffer
    int count = 0;            // elements
  };
  struct Posted {
    Segment segment;
    MPI_Request request = MPI_REQUEST_NULL;
    int slot = -1;  // incoming slot of a reduce-scatter segment
  };

  RingAllReduce(std::shared_ptr<GroupCore> core, std::int64_t seq, const void* send, void* recv, std::int64_t count,
                DataType type, ReduceOp op, std::int64_t segment_bytes);

  // The chunk received at `step` (sent on at step + 1).
  [[nodiscard]] int ChunkReceivedAt(int step) const noexcept;
  // The segments of `chunk`, appended in order.
  void AppendSegments(int step, int chunk, std::vector<Segment>& out) const;
  // Sends `segment` to the right from `from` (inside recv when `reads_recv`).
  [[nodiscard]] absl::Status SendSegment(const Segment& segment, const void* from, bool reads_recv);
  // Keeps up to kWindow receives posted.
  [[nodiscard]] absl::Status PostReceives();
  // Takes in every segment that has arrived, in order; true when the operation is done.
  [[nodiscard]] absl::StatusOr<bool> Advance();
  // "all_reduce #3 (ring) on group {0, 1}".
  [[nodiscard]] std::string Describe() const;
  [[nodiscard]] absl::Status Error(int rc, const char* call) const;
  void Finish(absl::Status status);
  [[nodiscard]] absl::Status TimedOut();

  std::shared_ptr<GroupCore> core_;
  std::int64_t seq_;
  const unsigned char* send_;
  unsigned char* recv_;
  DataType type_;
  ReduceOp op_;
  std::int64_t esize_;
  std::int64_t segment_elements_;
  std::int64_t slot_elements_ = 0;  // room of one incoming slot: a segment, or less for small buffers
  int tag_;
  std::vector<std::int64_t> offsets_;  // p + 1 element offsets of the chunks
  std::vector<Segment> incoming_order_;  // every segment this member receives, in order
  std::size_t next_to_post_ = 0;
  std::deque<Posted> posted_;          // receives in flight, oldest first
  std::vector<int> free_slots_;
  // kWindow segment-sized buffers for reduce-scatter segments; shared so that they can
  // outlive this request when a timed-out receive cannot be withdrawn.
  std::shared_ptr<std::vector<unsigned char>> slots_;
  std::vector<MPI_Request> sends_;
  // Region (element offset of a segment in recv) -> its latest send reading recv, so that an
  // all-gather receive into that region waits for it.
  std::unordered_map<std::int64_t, std::size_t> region_sends_;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace testbed::mpi
