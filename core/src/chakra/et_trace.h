// Chakra execution traces as plain data (MLCommons Chakra, schema "et_def.proto"; our own
// copy of the schema is core/src/chakra/et_def.proto). A trace is one rank's file: a
// GlobalMetadata message, then Node messages, each preceded by its length as a varint (the
// framing Chakra's tools and ASTRA-sim 2.x read and write). Nothing here names a protobuf
// type: the reader and writer (et_io.h) convert between these structs and the wire format,
// and the rest of the core (import and export of schedules) sees only these structs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace testbed::chakra {

// Chakra's NodeType and CollectiveCommType values (et_def.proto).
enum class NodeType : std::int32_t {
  kInvalid = 0,
  kMetadata = 1,
  kMemLoad = 2,
  kMemStore = 3,
  kComp = 4,
  kCommSend = 5,
  kCommRecv = 6,
  kCommColl = 7,
  kStorage = 8,
  kBatch = 9,
  kCheckpoint = 10,
};
[[nodiscard]] const char* NodeTypeName(std::int32_t type) noexcept;  // "COMP_NODE", ...; "UNKNOWN" otherwise

enum class CollType : std::int64_t {
  kAllReduce = 0,
  kReduce = 1,
  kAllGather = 2,
  kGather = 3,
  kScatter = 4,
  kBroadcast = 5,
  kAllToAll = 6,
  kReduceScatter = 7,
  kReduceScatterBlock = 8,
  kBarrier = 9,
};
[[nodiscard]] const char* CollTypeName(std::int64_t type) noexcept;  // "ALL_REDUCE", ...; "UNKNOWN" otherwise

// One AttributeProto. The schema's value is a oneof over many scalar and list types; they
// fold into five C++ types here (every integer type, signed or not, into int64 / a list of
// int64), and `wire` keeps which field number it came from so that a writer can give back
// the same field (0 for an attribute built in code: the writer picks int64 / double /
// string / bool / int64 list / double list / string list / bool list).
struct Attr {
  using Value = std::variant<std::monostate, std::int64_t, double, bool, std::string, std::vector<std::int64_t>,
                             std::vector<double>, std::vector<bool>, std::vector<std::string>>;
  std::string name;
  Value value;
  int wire = 0;  // AttributeProto field number of the value (3..32); 0: chosen by type

  [[nodiscard]] const std::int64_t* AsInt() const noexcept { return std::get_if<std::int64_t>(&value); }
  [[nodiscard]] const double* AsDouble() const noexcept { return std::get_if<double>(&value); }
  [[nodiscard]] const bool* AsBool() const noexcept { return std::get_if<bool>(&value); }
  [[nodiscard]] const std::string* AsString() const noexcept { return std::get_if<std::string>(&value); }
  [[nodiscard]] const std::vector<std::int64_t>* AsIntList() const noexcept {
    return std::get_if<std::vector<std::int64_t>>(&value);
  }
};

struct Node {
  std::uint64_t id = 0;
  std::string name;
  std::int32_t type = 0;  // NodeType (kept as read: unknown values survive to be named)
  std::vector<std::uint64_t> ctrl_deps;
  std::vector<std::uint64_t> data_deps;
  std::uint64_t start_time_micros = 0;
  std::uint64_t duration_micros = 0;
  std::vector<Attr> attrs;
  // Schema fields we read past without modelling them (inputs, outputs, storage): their
  // names, so that an importer can warn about them.
  std::vector<std::string> unmodelled_fields;
  // Byte offset of the node's length prefix in its file (0 for nodes built in code).
  std::uint64_t offset = 0;

  [[nodiscard]] const Attr* Find(const std::string& attr_name) const noexcept;
};

struct Trace {
  std::string version;     // GlobalMetadata.version
  std::vector<Attr> attrs;  // GlobalMetadata.attr
  std::vector<Node> nodes;
};

}  // namespace testbed::chakra

namespace testbed::chakra {

// Every rank's trace of one job, and its communicator groups (ASTRA-sim 2.x's communicator
// group file: a JSON object from a group name, the value of a collective's "pg_name"
// attribute, to its ranks). A collective without "pg_name" runs over every rank.
struct TraceSet {
  std::vector<Trace> ranks;  // rank i's trace
  std::vector<std::pair<std::string, std::vector<int>>> comm_groups;
};

}  // namespace testbed::chakra
