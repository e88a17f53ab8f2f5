// ASTRA-sim's classic text workloads (the DATA / MODEL / HYBRID_* / MICRO files its examples
// ship) as Chakra traces, one per rank, with the dependency structure of Chakra's own text
// converter, so that those workloads run in the testbed directly ([workload] astra_text).
//
// The format: line 1 is the parallelism ("DATA", "MODEL", "HYBRID_DATA_MODEL",
// "HYBRID_MODEL_DATA", "HYBRID_TRANSFORMER" or "MICRO", optionally followed by
// "model_parallel_NPU_group: g"); line 2 the number of layers; then one line per layer of 12
// whitespace-separated fields: name, a reserved field, then for the forward pass, the input
// gradient and the weight gradient each a compute time (cycles), a communication type
// (ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL or NONE) and its size (bytes), and last the
// weight update time (not modelled, as in Chakra's converter).
//
// Where we differ from Chakra's converter, and why: a NONE communication makes no node (its
// converter writes a zero-byte all-reduce); the hybrids' forward and input-gradient
// communication runs over model-parallel groups of g ranks and the weight gradient's over the
// data-parallel groups (its converter leaves every collective on all ranks): consecutive ranks
// form a model-parallel group for HYBRID_MODEL_DATA and HYBRID_TRANSFORMER, strided ranks for
// HYBRID_DATA_MODEL (data parallelism innermost). HYBRID_DLRM is refused.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "chakra/et_trace.h"

namespace testbed::chakra {

struct TextWorkloadOptions {
  int ranks = 1;            // NPUs
  int passes = 1;           // training iterations, each depending on the previous one's weight gradients
  double cycle_s = 1e-9;    // seconds per cycle (ASTRA-sim's analytical backend: 1 ns)
  int model_parallel = 0;   // hybrids' model-parallel group size; 0: the file's, else all ranks
};

// Errors name the file and line.
[[nodiscard]] absl::StatusOr<TraceSet> ConvertTextWorkload(const std::string& path, const TextWorkloadOptions& options);
[[nodiscard]] absl::StatusOr<TraceSet> ConvertTextWorkloadString(const std::string& text, const std::string& name,
                                                                 const TextWorkloadOptions& options);

}  // namespace testbed::chakra
