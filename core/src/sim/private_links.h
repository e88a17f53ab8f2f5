// Links no two transfers can ever hold at once, found before the engine runs (LinkSharing
// moves transfers that cross only such links without re-rating anyone: sim/link_sharing.h).
// A link is private when one (device, stream) order holds every communication task whose
// plan crosses it: that stream runs them one after another, and a transfer releases its
// links before its task completes, so each finds the link idle and gets its whole
// bandwidth. The tensor-parallel collectives of a gang inside one node (its NVLink ports)
// are the usual case.
#pragma once

#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "testbed/collective.h"
#include "testbed/schedule.h"

namespace testbed::sim {

// One entry per link of the cluster (`links`): 1 where private. `comm` holds each task's plan
// (null: none); `receive_of(send)` the receive paired with a send, whose stream the transfer
// also occupies.
[[nodiscard]] std::vector<char> PrivateLinks(const Schedule& schedule, std::span<const CommPlan* const> comm,
                                             size_t links, absl::FunctionRef<TaskId(TaskId)> receive_of);

}  // namespace testbed::sim
