// Loads plugin libraries with Boost.DLL (DESIGN.md §3): reads the exported `testbed_plugin`
// entry, checks the ABI version before anything else, then lets the plugin register its
// components. Every failure is an error value; a library that fails is not used and leaves
// nothing registered.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/registry.h"

namespace testbed {

struct LoadedPlugin {
  std::string path;
  std::string name;
  std::string version;
  std::string description;
  std::string build;  // its build identity
};

struct PluginFailure {
  std::string path;
  std::string error;
};

class PluginLoader {
 public:
  explicit PluginLoader(Registry& registry);
  ~PluginLoader();
  PluginLoader(const PluginLoader&) = delete;
  PluginLoader& operator=(const PluginLoader&) = delete;

  // Loads one library. Errors: NotFound (no file), FailedPrecondition (not a testbed
  // plugin, or another ABI version: the message names both), AlreadyExists (a plugin of
  // the same name is loaded, or one of its components clashes), or whatever its register
  // callback returned.
  absl::StatusOr<LoadedPlugin> Load(const std::filesystem::path& library);

  // Loads every *.so in each directory, in order. A plugin whose name is already loaded
  // from an earlier directory is skipped silently (the earlier directory wins); other
  // failures are collected in failures().
  void LoadDirectories(const std::vector<std::filesystem::path>& directories);

  [[nodiscard]] const std::vector<LoadedPlugin>& loaded() const noexcept { return loaded_; }
  [[nodiscard]] const std::vector<PluginFailure>& failures() const noexcept { return failures_; }

  // TESTBED_PLUGIN_PATH entries, then <executable>/../lib/testbed/plugins.
  [[nodiscard]] static std::vector<std::filesystem::path> DefaultSearchPath(const std::filesystem::path& executable);

 private:
  Registry& registry_;
  std::vector<LoadedPlugin> loaded_;
  std::vector<PluginFailure> failures_;
  std::vector<std::shared_ptr<const void>> libraries_;
};

}  // namespace testbed
