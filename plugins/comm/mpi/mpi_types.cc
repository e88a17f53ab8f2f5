#include "mpi_types.h"

#include <climits>

#include "absl/strings/str_cat.h"

namespace testbed::mpi {

MPI_Datatype ToMpi(DataType type) noexcept {
  switch (type) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kUInt8: return MPI_UINT8_T;
    case DataType::kUInt32: return MPI_UINT32_T;
    case DataType::kUInt64: return MPI_UINT64_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op ToMpi(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kBitOr: return MPI_BOR;
  }
  return MPI_OP_NULL;
}

absl::StatusOr<int> IntCount(std::int64_t count, const char* what) {
  if (count > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", count, " elements; MPI counts and offsets are int (at most ", INT_MAX, ")"));
  }
  return static_cast<int>(count);
}

absl::StatusOr<IntLayout> IntCounts(std::span<const std::int64_t> counts, const char* what) {
  IntLayout layout;
  std::int64_t offset = 0;
  for (std::int64_t c : counts) {
    auto count = IntCount(c, what);
    if (!count.ok()) return count.status();
    auto displ = IntCount(offset, what);
    if (!displ.ok()) return displ.status();
    layout.counts.push_back(*count);
    layout.displs.push_back(*displ);
    offset += c;
  }
  return layout;
}

}  // namespace testbed::mpi
