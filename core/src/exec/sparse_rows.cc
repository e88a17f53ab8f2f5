#include "exec/sparse_rows.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "testbed/status_macros.h"

namespace testbed::exec {
namespace {

absl::Status CheckIds(const std::vector<std::int64_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || (i > 0 && ids[i] <= ids[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("row ids must be ascending, unique and >= 0; id ", i, " is ", ids[i]));
    }
  }
  return absl::OkStatus();
}

// ids grouped by owner (each group ascending), how many each owner gets, and where each id
// went in that order.
struct ByOwner {
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> counts;
  std::vector<size_t> position;  // position[k]: index in `ids` of the k-th id given
};

ByOwner GroupByOwner(const std::vector<std::int64_t>& ids, int n) {
  ByOwner out;
  out.counts.assign(static_cast<size_t>(n), 0);
  for (std::int64_t id : ids) ++out.counts[static_cast<size_t>(RowOwner(id, n))];
  std::vector<std::int64_t> next(static_cast<size_t>(n), 0);
  for (int j = 1; j < n; ++j) next[static_cast<size_t>(j)] = next[static_cast<size_t>(j - 1)] + out.counts[static_cast<size_t>(j - 1)];
  out.ids.resize(ids.size());
  out.position.resize(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    const auto at = static_cast<size_t>(next[static_cast<size_t>(RowOwner(ids[k], n))]++);
    out.ids[at] = ids[k];
    out.position[k] = at;
  }
  return out;
}

// How many elements every member sends this one (what this one sends each, exchanged).
absl::StatusOr<std::vector<std::int64_t>> Incoming(CommGroup& group, const std::vector<std::int64_t>& outgoing) {
  const size_t n = static_cast<size_t>(group.size());
  std::vector<std::int64_t> ones(n, 1), incoming(n, 0);
  TESTBED_RETURN_IF_ERROR(group.AllToAllV(outgoing.data(), ones, incoming.data(), ones, DataType::kInt64));
  return incoming;
}

std::vector<std::int64_t> Scaled(const std::vector<std::int64_t>& counts, std::int64_t by) {
  std::vector<std::int64_t> out = counts;
  for (auto& c : out) c *= by;
  return out;
}

}  // namespace

absl::StatusOr<SparseRowBlock> ExchangeRowGradients(CommGroup& group, const SparseRowBlock& mine, std::int64_t dim) {
  TESTBED_RETURN_IF_ERROR(CheckIds(mine.ids));
  if (mine.values.rows() != static_cast<Eigen::Index>(mine.ids.size()) || (mine.values.size() > 0 && mine.values.cols() != dim)) {
    return absl::InvalidArgumentError(absl::StrCat("row gradients: ", mine.ids.size(), " ids and a ", mine.values.rows(), " x ",
                                                   mine.values.cols(), " block; rows of ", dim, " expected"));
  }
  const int n = group.size();
  const ByOwner out = GroupByOwner(mine.ids, n);
  train::Matrix<float> values(static_cast<Eigen::Index>(out.ids.size()), dim);
  for (size_t k = 0; k < mine.ids.size(); ++k) values.row(static_cast<Eigen::Index>(out.position[k])) = mine.values.row(static_cast<Eigen::Index>(k));
  TESTBED_ASSIGN_OR_RETURN(const std::vector<std::int64_t> incoming, Incoming(group, out.counts));
  std::int64_t total = 0;
  for (std::int64_t c : incoming) total += c;
  std::vector<std::int64_t> ids(static_cast<size_t>(total));
  TESTBED_RETURN_IF_ERROR(group.AllToAllV(out.ids.data(), out.counts, ids.data(), incoming, DataType::kInt64));
  train::Matrix<float> got(static_cast<Eigen::Index>(total), dim);
  TESTBED_RETURN_IF_ERROR(
      group.AllToAllV(values.data(), Scaled(out.counts, dim), got.data(), Scaled(incoming, dim), DataType::kFloat32));
  // Summed per row, rows ascending; every member's contribution in member order, so the sum
  // is the same on any run.
  std::map<std::int64_t, Eigen::Index> slot;
  for (std::int64_t id : ids) slot.emplace(id, 0);
  SparseRowBlock summed;
  summed.values = train::Matrix<float>::Zero(static_cast<Eigen::Index>(slot.size()), dim);
  Eigen::Index next = 0;
  for (auto& [id, at] : slot) {
    at = next++;
    summed.ids.push_back(id);
  }
  for (size_t k = 0; k < ids.size(); ++k) {
    if (RowOwner(ids[k], n) != group.rank()) {
      return absl::InternalError(absl::StrCat("received row ", ids[k], ", which member ", group.rank(), " does not own"));
    }
    summed.values.row(slot.at(ids[k])) += got.row(static_cast<Eigen::Index>(k));
  }
  return summed;
}

absl::StatusOr<train::Matrix<float>> LookupRows(CommGroup& group, const std::vector<std::int64_t>& ids,
                                                const train::Matrix<float>& table) {
  TESTBED_RETURN_IF_ERROR(CheckIds(ids));
  if (!ids.empty() && ids.back() >= table.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("row ", ids.back(), " is outside the table of ", table.rows(), " rows"));
  }
  const int n = group.size();
  const std::int64_t dim = table.cols();
  const ByOwner out = GroupByOwner(ids, n);
  TESTBED_ASSIGN_OR_RETURN(const std::vector<std::int64_t> incoming, Incoming(group, out.counts));
  std::int64_t total = 0;
  for (std::int64_t c : incoming) total += c;
  std::vector<std::int64_t> asked(static_cast<size_t>(total));
  TESTBED_RETURN_IF_ERROR(group.AllToAllV(out.ids.data(), out.counts, asked.data(), incoming, DataType::kInt64));
  // Answer from the rows this member owns, in the order asked.
  train::Matrix<float> answer(static_cast<Eigen::Index>(total), dim);
  for (size_t k = 0; k < asked.size(); ++k) {
    if (asked[k] < 0 || asked[k] >= table.rows() || RowOwner(asked[k], n) != group.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("member ", group.rank(), " was asked for row ", asked[k],
                                                     ", which it does not own"));
    }
    answer.row(static_cast<Eigen::Index>(k)) = table.row(asked[k]);
  }
  train::Matrix<float> got(static_cast<Eigen::Index>(ids.size()), dim);
  TESTBED_RETURN_IF_ERROR(
      group.AllToAllV(answer.data(), Scaled(incoming, dim), got.data(), Scaled(out.counts, dim), DataType::kFloat32));
  train::Matrix<float> rows(static_cast<Eigen::Index>(ids.size()), dim);
  for (size_t k = 0; k < ids.size(); ++k) rows.row(static_cast<Eigen::Index>(k)) = got.row(static_cast<Eigen::Index>(out.position[k]));
  return rows;
}

}  // namespace testbed::exec
