// Validation of TOML tables against parameter declarations: the one place where unknown
// keys, wrong types and out-of-range values become errors that name the file, line and
// column, the key, its owner (section or component) and what was expected.
#pragma once

#include "absl/strings/string_view.h"
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "config/config_doc.h"
#include "testbed/param_set.h"
#include "testbed/param_spec.h"

namespace testbed {

// Collects every problem found, so that one validation pass reports all of them.
class ErrorList {
 public:
  void Add(const SourceLoc& where, std::string message);
  void Add(std::string message);
  // Adds a status's message when it is an error (prefixing nothing: it names its place).
  void Add(const absl::Status& status);
  [[nodiscard]] bool empty() const noexcept { return errors_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return errors_.size(); }
  // InvalidArgument with one error per line, or OK.
  [[nodiscard]] absl::Status ToStatus() const;

 private:
  std::vector<std::string> errors_;
};

// The resolved value of a parameter the core declared in one of its schemas. A name the schema
// does not declare, or another type, is a bug: it is recorded in `errors` and gives T{}, never
// a silent default.
template <typename T>
[[nodiscard]] T Declared(const ParamSet& params, const std::string& name, ErrorList& errors) {
  absl::StatusOr<T> v = params.Get<T>(name);
  if (v.ok()) return *std::move(v);
  errors.Add(absl::StrCat("internal: reading '", name, "': ", v.status().message()));
  return T{};
}

// The nearest of `candidates` to `key` by edit distance, if close enough to be a typo.
[[nodiscard]] std::string DidYouMean(absl::string_view key, const std::vector<std::string>& candidates);

// Converts one TOML value to the declared type (an integer is accepted for a float) and
// checks its range and choices. The error text is "expected <what>, got <value>".
[[nodiscard]] absl::StatusOr<ParamValue> ConvertValue(const toml::node& node, const ParamSpec& spec);

// Resolves the table at `table_path` of `doc` (absent: all defaults) against `specs`.
// Keys in `other_keys` are allowed and left to the caller; any other unknown key, a wrong
// type, a value out of range or a missing required key is added to `errors`, naming
// `owner` (e.g. "[train]" or "partitioner 'merak'").
[[nodiscard]] ParamSet ResolveParams(const ConfigDoc& doc, const KeyPath& table_path,
                                     const std::vector<ParamSpec>& specs, absl::string_view owner,
                                     const std::set<std::string>& other_keys, ErrorList& errors);

}  // namespace testbed
