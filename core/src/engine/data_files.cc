#include "engine/data_files.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace testbed {

absl::StatusOr<std::string> FindData(const std::string& relative) {
  std::vector<std::filesystem::path> roots;
  if (const char* env = std::getenv("TESTBED_DATA_PATH")) {
    for (absl::string_view p : absl::StrSplit(env, ':', absl::SkipEmpty())) roots.emplace_back(std::string(p));
  }
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path().parent_path() / "share" / "testbed" / "data");
  for (const auto& root : roots) {
    if (std::filesystem::is_regular_file(root / relative, ec)) return (root / relative).string();
  }
  return absl::NotFoundError(absl::StrCat("data file '", relative, "' not found under TESTBED_DATA_PATH or the "
                                          "install's share/testbed/data"));
}

}  // namespace testbed
