// Reading and writing one rank's Chakra trace file (framing in et_trace.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chakra/et_trace.h"

namespace testbed::chakra {

// Reads `path`. Errors name the file and the byte offset where reading failed: a file that
// cannot be opened (NotFound), a length prefix or message cut short (DataLoss: "truncated at
// byte N"), bytes that do not parse as the message the framing promises (DataLoss: "not a
// Chakra trace: ... at byte N", e.g. a file of another format), a node whose type is not in
// the schema is kept (its type value as read) for the importer to name.
[[nodiscard]] absl::StatusOr<Trace> ReadTrace(const std::string& path);

// Writes `trace` to `path` atomically (a temporary file renamed into place), so that an
// interrupted write never leaves half a trace under the final name.
[[nodiscard]] absl::Status WriteTrace(const Trace& trace, const std::string& path);

// The same, to and from a byte string (tests, and a caller that frames several traces).
[[nodiscard]] std::string EncodeTrace(const Trace& trace);
[[nodiscard]] absl::StatusOr<Trace> DecodeTrace(const std::string& bytes, const std::string& name_for_errors);

}  // namespace testbed::chakra

namespace testbed::chakra {

// A job's files: `<prefix>.<rank>.et` for rank 0, 1, ... (ASTRA-sim's naming) up to the
// first missing rank, and `<prefix>.comm_groups.json` when it exists. `dir_or_prefix` may
// also be a directory holding exactly one such set. NotFound when no rank-0 file exists
// (naming what was looked for); errors of a file name it.
[[nodiscard]] absl::StatusOr<TraceSet> ReadTraceSet(const std::string& dir_or_prefix);
// Writes every rank's file and the communicator group file (when there are groups) under
// `prefix`, creating the directory; each file atomically. Returns the paths written.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> WriteTraceSet(const TraceSet& set, const std::string& prefix);

// The communicator group file's JSON, both ways. Errors name the file and the byte offset.
[[nodiscard]] std::string EncodeCommGroups(const std::vector<std::pair<std::string, std::vector<int>>>& groups);
[[nodiscard]] absl::StatusOr<std::vector<std::pair<std::string, std::vector<int>>>> DecodeCommGroups(
    const std::string& json, const std::string& name_for_errors);

}  // namespace testbed::chakra
