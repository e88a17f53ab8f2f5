// Sparse embedding communication on real ranks (EmbRace's hybrid communication): the rows of
// an embedding table are owned by the members of a group in turn (row r: member r mod n).
// A member sends the gradients of the rows its batch touched to their owners, which sum them,
// and fetches the rows its next batch names from their owners; both by all-to-all-v, ids and
// values, so only touched rows travel.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/communicator.h"
#include "testbed/train/tensor.h"

namespace testbed::exec {

// Rows of a table by id, ascending, one row of `values` each.
struct SparseRowBlock {
  std::vector<std::int64_t> ids;
  train::Matrix<float> values;
};

// The owner of `row` in a group of `members`.
[[nodiscard]] constexpr int RowOwner(std::int64_t row, int members) noexcept { return static_cast<int>(row % members); }

// Every member's touched rows to their owners: this member gets, for each row it owns that
// any member touched, the sum of their gradients (ids ascending). `mine.ids` ascending and
// unique; `dim` the row width. InvalidArgument on ids out of order or a width mismatch.
[[nodiscard]] absl::StatusOr<SparseRowBlock> ExchangeRowGradients(CommGroup& group, const SparseRowBlock& mine,
                                                                  std::int64_t dim);

// Fetches the rows `ids` (ascending, unique) from their owners, which answer from `table`
// (the whole table's shape; only the rows a member owns are read from it). Returns them in
// the order of `ids`.
[[nodiscard]] absl::StatusOr<train::Matrix<float>> LookupRows(CommGroup& group, const std::vector<std::int64_t>& ids,
                                                              const train::Matrix<float>& table);

}  // namespace testbed::exec
