// The subcommands of `testbed`, kept apart from argument parsing (CLI11 is slow to compile
// and lives in main.cc alone).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/preset_library.h"
#include "engine/plugin_loader.h"
#include "testbed/registry.h"

namespace testbed::cli {

struct Env {
  std::unique_ptr<Registry> registry;
  std::unique_ptr<PluginLoader> loader;
  std::unique_ptr<PresetLibrary> presets;
  std::vector<std::string> plugin_dirs;
};

// Loads the plugins and finds the presets, relative to this executable.
[[nodiscard]] Env MakeEnv();
[[nodiscard]] std::string VersionString();

struct RunArgs {
  std::string file;
  std::vector<std::string> sets;
  std::vector<std::string> only;
  std::vector<std::string> points;
  bool dry_run = false;
  int jobs = 1;
  bool fresh = false;
  std::string output;
  bool quiet = false;
  std::string shard;  // "K/N": part K (0-based) of N
};
struct ValidateArgs {
  std::string file;
  std::vector<std::string> sets;
};
struct PluginsArgs {
  std::string kind;
};
struct ShowArgs {
  std::string file;
  bool csv = false;
  std::string run;
  bool exact = false;  // with --run: every value with 17 significant digits (round-trips exactly)
};

// Prints "error: <message>" and returns the failing exit status.
int Fail(const absl::Status& status);

int Run(Env& env, const RunArgs& args);
int Validate(Env& env, const ValidateArgs& args);
int Plugins(Env& env, const PluginsArgs& args);
int Show(const ShowArgs& args);

struct TraceArgs {
  std::string file;
  std::string run;
};
// Writes the run's timeline as Chrome-trace JSON to stdout.
int Trace(const TraceArgs& args);
// Rewrites a results file without dead space; prints its size before and after.
int Compact(const std::string& file);

}  // namespace testbed::cli
