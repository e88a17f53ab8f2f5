// Fuzz target: an experiment file through everything `testbed validate` does (TOML parse,
// presets, arms and points, every run resolved against the loaded components). Any input
// must end in a result or a clean error: no crash, no hang, no unbounded allocation.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "config/experiment.h"
#include "config/preset_library.h"
#include "engine/plugin_loader.h"
#include "engine/runner.h"
#include "testbed/registry.h"

namespace {

struct World {
  testbed::Registry registry;
  testbed::PluginLoader loader{registry};
  std::unique_ptr<testbed::PresetLibrary> presets;
  std::filesystem::path file;
  World() {
    loader.LoadDirectories({TESTBED_FUZZ_PLUGIN_DIR});
    presets = std::make_unique<testbed::PresetLibrary>(std::vector<std::filesystem::path>{TESTBED_FUZZ_CONFIG_DIR});
    file = std::filesystem::temp_directory_path() / ("testbed-fuzz-" + std::to_string(::getpid()) + ".toml");
  }
  ~World() {
    std::error_code ec;
    std::filesystem::remove(file, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World world;
  {
    std::ofstream out(world.file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto ex = testbed::Experiment::Load(world.file, {});
  if (!ex.ok()) return 0;
  auto runs = testbed::ResolveAll(*ex, world.registry, *world.presets, {});
  (void)runs;
  return 0;
}
