// A TOML document together with where each of its values came from (file, line, column),
// so that errors found long after parsing (validation of a merged run configuration) can
// still point at the exact place a user wrote the value. toml++ drops source positions when
// nodes are copied, so positions are kept here, keyed by path.
#pragma once

#include "absl/strings/string_view.h"
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "absl/status/statusor.h"

namespace testbed {

struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;
  // "file:line:column", "file" when the position is unknown.
  [[nodiscard]] std::string ToString() const;
};

using KeyPath = std::vector<std::string>;
// "train.micro_batch"; a key that itself contains a dot is quoted: sweep."model.preset".
[[nodiscard]] std::string PathToString(const KeyPath& path);
// Splits "a.b.c" on dots (quoted segments kept whole). Fails on an empty segment.
[[nodiscard]] absl::StatusOr<KeyPath> ParsePath(absl::string_view dotted);

class ConfigDoc {
 public:
  ConfigDoc() = default;
  // Parse errors give "file:line:column: message".
  [[nodiscard]] static absl::StatusOr<ConfigDoc> ParseFile(const std::filesystem::path& file);
  [[nodiscard]] static absl::StatusOr<ConfigDoc> ParseString(absl::string_view text, std::string source_name);

  // Every value's position becomes just the source name (a --set argument, whose line and
  // column would be those of the text made from it).
  void ForgetLinePositions();
  // The document's own position (Where of its root and of what has none of its own): a
  // section merged from a preset and a file's overrides is where the file wrote the section.
  void SetOrigin(const SourceLoc& where);

  [[nodiscard]] const toml::table& root() const noexcept { return root_; }
  [[nodiscard]] const std::string& file() const noexcept { return file_; }

  [[nodiscard]] const toml::node* Get(const KeyPath& path) const;
  [[nodiscard]] const toml::table* GetTable(const KeyPath& path) const;
  // The position of the value at `path`, or of its nearest ancestor, or just the file.
  [[nodiscard]] SourceLoc Where(const KeyPath& path) const;

  // Sets the value at `path` (creating tables on the way) to a copy of `value`, whose
  // positions are those recorded in `from` under `from_path`. A string met on the way where
  // a table is needed is read as a component shorthand: "merak" becomes { use = "merak" }.
  absl::Status Set(const KeyPath& path, const toml::node& value, const ConfigDoc& from, const KeyPath& from_path);
  void Erase(const KeyPath& path);

  // Copies a subtree of `from` (positions included) to become this document's root table.
  [[nodiscard]] static ConfigDoc Subtree(const ConfigDoc& from, const KeyPath& path);

  // The document as TOML text (positions are not part of it).
  [[nodiscard]] std::string ToToml() const;

 private:
  void RecordPositions(const toml::node& node, const KeyPath& path);
  [[nodiscard]] static std::string Key(const KeyPath& path);

  toml::table root_;
  std::string file_;
  std::map<std::string, SourceLoc> where_;
};

}  // namespace testbed
