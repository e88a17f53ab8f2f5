// The importer's working state (import.h says what it does). Two passes, two files:
// import.cc turns nodes into units (a unit becomes one task: a node, or the member nodes of
// one collective or one traced gang); import_order.cc checks and matches them, resolves
// dependencies through nodes that make no task, gives each unit its stream, and adds the
// tasks in an order that respects dependencies and each rank's file order per stream.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "chakra/import.h"

namespace testbed::chakra {

struct NodeRef {
  int rank = 0;
  int index = 0;  // in the rank's Trace::nodes
};

// What a trace holds that the schedule does not model: one line per kind, with a count and
// the first node it was seen on.
class Warnings {
 public:
  void Add(const std::string& what, const std::string& first_where);
  [[nodiscard]] std::vector<std::string> Lines() const;

 private:
  std::map<std::string, std::pair<std::int64_t, std::string>> seen_;
};

struct Unit {
  Task task;  // all but stream and dependencies
  std::vector<NodeRef> nodes;
  KernelWork kernel;
  CopyWork copy;
  AllToAllVWork alltoallv;
  int fixed_stream = -1;  // the exporter's testbed_stream, when given
  std::vector<int> deps;  // units it depends on
};

class UnitBuilder {
 public:
  UnitBuilder(const TraceSet& set, const std::string& source, const ImportOptions& options);
  [[nodiscard]] absl::Status Build();
  // Adds the tasks in order; call once after Build succeeded.
  [[nodiscard]] absl::StatusOr<ImportedWorkload> Finish();

 private:
  [[nodiscard]] const Node& node(NodeRef r) const {
    return set_.ranks[static_cast<size_t>(r.rank)].nodes[static_cast<size_t>(r.index)];
  }
  [[nodiscard]] std::string Where(NodeRef ref) const;
  [[nodiscard]] absl::StatusOr<std::optional<std::int64_t>> IntAttr(NodeRef ref, const char* name) const;
  int NewUnit(NodeRef ref);
  void Join(int unit, NodeRef ref);
  void NoteAttributes(NodeRef ref, std::initializer_list<const char*> known);

  // import.cc: one node.
  absl::Status AddNode(NodeRef ref);
  absl::Status AddCompute(NodeRef ref);
  absl::Status AddCollective(NodeRef ref);
  absl::Status AddPointToPoint(NodeRef ref);
  absl::Status AddCopy(NodeRef ref);
  absl::Status CommonFields(NodeRef ref, Unit& u);

  // import_order.cc: the units together.
  absl::Status CheckCollectives();
  absl::Status MatchSends();
  absl::Status ResolveDeps();
  void AssignStreams();
  [[nodiscard]] int StreamOf(const Unit& u) const;

  const TraceSet& set_;
  std::string source_;
  ImportOptions options_;
  Schedule schedule_;
  Warnings warn_;
  std::int64_t nodes_ = 0;
  std::vector<Unit> units_;
  std::vector<std::vector<int>> unit_of_;  // [rank][node index] -> unit, -1: makes no task
  std::vector<std::unordered_map<std::uint64_t, int>> index_of_;  // [rank]: node id -> index
  std::map<std::string, std::int32_t> group_of_name_;
  std::int32_t world_group_ = -1;
  std::map<std::pair<int, int>, int> collectives_seen_;  // (rank, group) -> collectives so far
  std::map<std::pair<int, int>, int> collective_unit_;   // (group, ordinal) -> unit
  std::unordered_map<std::int64_t, int> gang_unit_;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<int>> sends_, recvs_;
  std::vector<int> partner_;  // per unit: a send's receive, a receive's send; -1 otherwise
  std::map<std::int32_t, std::uint8_t> group_stream_;  // collective group -> stream
};

}  // namespace testbed::chakra
