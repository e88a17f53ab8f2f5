// Checks that any communicator's operations compute what a serial loop over the ranks'
// inputs computes. Every member of a group calls the same check at the same time (from its
// thread or process); each rank knows every rank's input (it is a function of the rank), so
// each can compare its output to the serial reference on its own. Failures are gtest
// expectations.
#pragma once

#include <vector>

#include "buffer_space.h"
#include "testbed/communicator.h"

namespace testbed::testing {

// What a communicator's point-to-point supports beyond NCCL's semantics.
struct P2pFeatures {
  bool sends_to_self = true;      // a rank may send to itself
  bool reorders_by_tag = true;    // receives match sends by tag, not only by posting order
  bool larger_receive = true;     // a receive may post more room than the message needs
  // NCCL: a rank's operations on a group run one at a time in posting order and a send
  // finishes only once its receive runs, so an exchange must be ordered not to wait on itself.
  bool sends_wait_for_receives = false;
};

// All-reduce (sum, max, min; bit_or on unsigned types) on every element type, in place and
// not, with counts that do not divide by the group size.
void CheckAllReduce(CommGroup& group, BufferSpace& space);
// Broadcast from every root.
void CheckBroadcast(CommGroup& group, BufferSpace& space);
// All-gather(-v), reduce-scatter(-v) and all-to-all(-v) with uneven (and zero) counts.
void CheckGatherScatter(CommGroup& group, BufferSpace& space);
// Send/receive around a ring and matched by tag (out of order where supported); barriers.
void CheckPointToPoint(CommGroup& group, BufferSpace& space, const P2pFeatures& features = {});
// Several asynchronous operations in flight, waited for out of order and by polling.
void CheckAsync(CommGroup& group, BufferSpace& space);
// Every member gets bitwise the same float sum of random inputs.
void CheckSameResultEverywhere(CommGroup& group, BufferSpace& space);
// Mistakes caught at the call: bit_or on floats, a bad root, a wrong number of counts.
void CheckArgumentErrors(CommGroup& group);
// Sub-groups (even/odd ranks, reversed order, nested) compute over their members only and
// map their ranks to world ranks.
void CheckSubGroups(CommGroup& group, BufferSpace& space);

// Runs all of the above.
void CheckEverything(CommGroup& group, BufferSpace& space, const P2pFeatures& features = {});

// Rank `missing` never joins an all-reduce: every other rank must get DeadlineExceeded
// naming the operation and the missing rank, and the group is broken afterwards. The missing
// rank returns at once without calling anything. `buffer` (16 floats) must outlive the
// group: an implementation may still write the abandoned result into it (MPI cannot cancel
// a started collective).
void CheckMissingRankInAllReduce(CommGroup& group, int missing, std::vector<float>& buffer);

}  // namespace testbed::testing
