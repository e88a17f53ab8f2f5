// The MPI names of the communicator's element types and reductions, and the limit MPI's
// int counts put on buffer sizes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <mpi.h>

#include "absl/status/statusor.h"
#include "testbed/communicator.h"

namespace testbed::mpi {

[[nodiscard]] MPI_Datatype ToMpi(DataType type) noexcept;
[[nodiscard]] MPI_Op ToMpi(ReduceOp op) noexcept;

// `count` as an MPI int; InvalidArgument above INT_MAX elements.
[[nodiscard]] absl::StatusOr<int> IntCount(std::int64_t count, const char* what);
// Counts and their displacements (prefix sums) as MPI ints.
struct IntLayout {
  std::vector<int> counts;
  std::vector<int> displs;
};
[[nodiscard]] absl::StatusOr<IntLayout> IntCounts(std::span<const std::int64_t> counts, const char* what);

}  // namespace testbed::mpi
