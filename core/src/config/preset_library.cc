#include "absl/strings/string_view.h"
#include "config/preset_library.h"

#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace testbed {

PresetLibrary::PresetLibrary(std::vector<std::filesystem::path> roots) : roots_(std::move(roots)) {}

std::vector<std::filesystem::path> PresetLibrary::DefaultRoots(const std::filesystem::path& executable) {
  std::vector<std::filesystem::path> roots;
  if (const char* env = std::getenv("TESTBED_CONFIG_PATH")) {
    for (absl::string_view part : absl::StrSplit(env, ':', absl::SkipEmpty())) roots.emplace_back(std::string(part));
  }
  std::error_code ec;
  auto exe = std::filesystem::weakly_canonical(executable, ec);
  if (!ec) roots.push_back(exe.parent_path().parent_path() / "share" / "testbed" / "configs");
  return roots;
}

absl::StatusOr<ConfigDoc> PresetLibrary::Load(const std::string& category, const std::string& name) const {
  const std::string key = absl::StrCat(category, "/", name);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (name.empty() || name.find('/') != std::string::npos || name.find("..") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a valid ", category, " preset name"));
  }
  for (const auto& root : roots_) {
    std::filesystem::path file = root / category / (name + ".toml");
    std::error_code ec;
    if (std::filesystem::is_regular_file(file, ec)) {
      auto doc = ConfigDoc::ParseFile(file);
      if (!doc.ok()) return doc.status();
      cache_.emplace(key, *doc);
      return doc;
    }
  }
  std::vector<std::string> roots;
  for (const auto& r : roots_) roots.push_back(r.string());
  return absl::NotFoundError(absl::StrCat("no ", category, " preset named '", name, "'; available: ",
                                          absl::StrJoin(Names(category), ", "), " (searched ",
                                          roots.empty() ? "nothing" : absl::StrJoin(roots, ", "), ")"));
}

std::vector<std::string> PresetLibrary::Names(const std::string& category) const {
  std::set<std::string> names;
  for (const auto& root : roots_) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(root / category, ec)) {
      if (entry.path().extension() == ".toml") names.insert(entry.path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

}  // namespace testbed
