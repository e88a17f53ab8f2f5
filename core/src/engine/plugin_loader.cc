#include "absl/strings/string_view.h"
#include "engine/plugin_loader.h"

#include <algorithm>
#include <cstdlib>
#include <exception>

#include <boost/dll/shared_library.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "testbed/plugin.h"

namespace testbed {

PluginLoader::PluginLoader(Registry& registry) : registry_(registry) {}
PluginLoader::~PluginLoader() = default;

absl::StatusOr<LoadedPlugin> PluginLoader::Load(const std::filesystem::path& library) {
  const std::string path = library.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(library, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such plugin file"));
  }
  std::shared_ptr<boost::dll::shared_library> lib;
  try {
    // RTLD_LOCAL: two plugins may define the same symbols without resolving to each other's.
    lib = std::make_shared<boost::dll::shared_library>(
        boost::dll::fs::path(path), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot load the library: ", e.what()));
  }
  if (!lib->has("testbed_plugin")) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not a testbed plugin (it exports no 'testbed_plugin' entry; see testbed/plugin.h)"));
  }
  const PluginInfo* info = nullptr;
  try {
    info = lib->get_alias<const PluginInfo*()>("testbed_plugin")();
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": its testbed_plugin entry failed: ", e.what()));
  }
  if (info == nullptr) return absl::FailedPreconditionError(absl::StrCat(path, ": testbed_plugin returned null"));
  // The ABI version is the only field read before it is checked.
  if (info->abi_version != kAbiVersion) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": plugin built against testbed ABI version ",
                                                      info->abi_version, ", but this testbed has ABI version ",
                                                      kAbiVersion, "; rebuild the plugin against these headers"));
  }
  // Then the build identity: the same ABI version compiled by another toolchain (or against
  // another testbed release) would pass C++ values of another layout.
  const std::string build = info->build != nullptr ? info->build : "";
  if (build != kBuildIdentity) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": plugin built as '", build.empty() ? "(none)" : build,
                                                      "', but this testbed is '", kBuildIdentity,
                                                      "'; rebuild the plugin with this testbed's toolchain and headers"));
  }
  LoadedPlugin loaded{path, info->name ? info->name : "", info->version ? info->version : "",
                      info->description ? info->description : "", build};
  if (loaded.name.empty() || info->register_components == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": plugin info lacks a name or a register callback"));
  }
  for (const LoadedPlugin& other : loaded_) {
    if (other.name == loaded.name) {
      return absl::AlreadyExistsError(absl::StrCat(path, ": a plugin named '", loaded.name, "' is already loaded from ",
                                                   other.path));
    }
  }
  std::shared_ptr<const void> keep = lib;
  registry_.BeginPlugin(loaded.name, path, keep);
  absl::Status status;
  try {
    status = info->register_components(registry_);
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("register threw: ", e.what()));
  } catch (...) {
    status = absl::InternalError("register threw a non-standard exception");
  }
  if (!status.ok()) {
    registry_.RollbackPlugin();
    return absl::Status(status.code(), absl::StrCat(path, ": plugin '", loaded.name, "' failed to register: ",
                                                    status.message()));
  }
  registry_.CommitPlugin();
  libraries_.push_back(std::move(keep));
  loaded_.push_back(loaded);
  return loaded;
}

void PluginLoader::LoadDirectories(const std::vector<std::filesystem::path>& directories) {
  for (const auto& dir : directories) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      // A search-path entry that names nothing is most likely a typo in TESTBED_PLUGIN_PATH.
      failures_.push_back({dir.string(), absl::StrCat(dir.string(), ": plugin search path entry is not a directory")});
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".so") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      auto result = Load(file);
      if (result.ok()) continue;
      if (result.status().code() == absl::StatusCode::kAlreadyExists &&
          result.status().message().find("is already loaded from") != absl::string_view::npos) {
        continue;  // the same plugin found again further down the search path
      }
      failures_.push_back(PluginFailure{file.string(), std::string(result.status().message())});
    }
  }
}

std::vector<std::filesystem::path> PluginLoader::DefaultSearchPath(const std::filesystem::path& executable) {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("TESTBED_PLUGIN_PATH")) {
    for (absl::string_view part : absl::StrSplit(env, ':', absl::SkipEmpty())) dirs.emplace_back(std::string(part));
  }
  std::error_code ec;
  auto exe = std::filesystem::weakly_canonical(executable, ec);
  if (!ec) dirs.push_back(exe.parent_path().parent_path() / "lib" / "testbed" / "plugins");
  return dirs;
}

}  // namespace testbed
