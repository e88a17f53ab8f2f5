// A job's Chakra traces (one per rank) as a testbed Schedule, to simulate on any cluster.
//
// What each node becomes (rank r runs on device r):
// - COMP_NODE: a kernel (KernelOp::kTraced) on the compute stream, costed as given: the
//   attribute "testbed_duration_s" (seconds, exact) when present, else duration_micros; a node
//   without a duration but with "num_ops" (FLOPs) and "tensor_size" (bytes) is costed by the
//   device model at the options' precision.
// - COMM_COLL_NODE: one collective task over its group: the ranks of the communicator group
//   named by "pg_name" (TraceSet::comm_groups), every rank without one. The k-th collective
//   of a group on each member is the same collective (NCCL's rule); members must agree on
//   its type and "comm_size". Each group runs on a communication stream of its own where the
//   streams allow (two groups sharing a device get different streams).
// - COMM_SEND_NODE / COMM_RECV_NODE: a send and its receive, matched by ("comm_src",
//   "comm_dst", "comm_tag") in order.
// - MEM_LOAD_NODE / MEM_STORE_NODE: a copy of "tensor_size" bytes from / to host memory.
// - METADATA_NODE, INVALID_NODE and the kinds we do not model (storage, batch, checkpoint):
//   no task; what depends on them depends on their own dependencies. Unmodelled kinds,
//   attributes and fields are named in the warnings with their counts, never dropped silently.
// Control and data dependencies both become dependencies. Each rank's tasks of one stream run
// in the order its file lists them (Chakra's converters and the exporter write nodes in an
// order that respects dependencies); a dependency against that order, or a cycle, is an
// error naming the nodes.
//
// The exporter's own attributes ("testbed_stream", "testbed_iteration", "testbed_gang",
// "testbed_alltoallv_bytes", "testbed_host") give back what a schedule had beyond Chakra's
// schema, so that export then import reproduces the schedule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chakra/et_trace.h"
#include "testbed/device_model.h"
#include "testbed/schedule.h"

namespace testbed::chakra {

struct ImportOptions {
  Precision precision = Precision::kFp16;  // of kernels costed from their FLOPs and bytes
};

struct ImportedWorkload {
  Schedule schedule;
  std::vector<std::string> warnings;  // what the schedule does not model, with counts
  std::int64_t nodes = 0;             // nodes read over every rank
};

// `source` names the traces in errors (a prefix or directory).
[[nodiscard]] absl::StatusOr<ImportedWorkload> ImportTraceSet(const TraceSet& set, const std::string& source,
                                                              const ImportOptions& options = {});

// The attribute names of the exporter's extensions (import.h's list above).
inline constexpr const char* kAttrDuration = "testbed_duration_s";
inline constexpr const char* kAttrStream = "testbed_stream";
inline constexpr const char* kAttrIteration = "testbed_iteration";
inline constexpr const char* kAttrGang = "testbed_gang";
inline constexpr const char* kAttrAllToAllV = "testbed_alltoallv_bytes";
inline constexpr const char* kAttrHost = "testbed_host";

}  // namespace testbed::chakra
