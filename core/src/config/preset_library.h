// Finds and parses preset files: <root>/devices/<name>.toml, <root>/clusters/<name>.toml,
// <root>/models/<name>.toml. Roots are searched in order: the directories of
// TESTBED_CONFIG_PATH, then <executable>/../share/testbed/configs (the build tree and the
// install prefix have the same layout).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config_doc.h"

namespace testbed {

class PresetLibrary {
 public:
  explicit PresetLibrary(std::vector<std::filesystem::path> roots);
  [[nodiscard]] static std::vector<std::filesystem::path> DefaultRoots(const std::filesystem::path& executable);

  // Parses `<root>/<category>/<name>.toml` from the first root that has it. An unknown name
  // gives NotFound listing the names available in that category.
  [[nodiscard]] absl::StatusOr<ConfigDoc> Load(const std::string& category, const std::string& name) const;
  [[nodiscard]] std::vector<std::string> Names(const std::string& category) const;
  [[nodiscard]] const std::vector<std::filesystem::path>& roots() const noexcept { return roots_; }

 private:
  std::vector<std::filesystem::path> roots_;
  mutable std::map<std::string, ConfigDoc> cache_;
};

}  // namespace testbed
