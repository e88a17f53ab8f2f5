// A fixture for tests that run whole experiments through a backend with the built plugins:
// an experiment file from text, each of its runs resolved and run, and lookups of a run's
// metrics and table columns. The including test defines TESTBED_PLUGIN_DIR (the built
// plugins), TESTBED_TEST_PLUGIN_DIR (the test plugins) and TESTBED_TEST_CONFIG_DIR (presets).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "config/preset_library.h"
#include "config/run_config.h"
#include "engine/plugin_loader.h"
#include "test_support.h"
#include "engine/backend.h"

namespace testbed::testing {

class ExperimentRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    loader_.LoadDirectories({TESTBED_PLUGIN_DIR});
    ASSERT_TRUE(loader_.Load(std::filesystem::path(TESTBED_TEST_PLUGIN_DIR) / "good" / "fixture_good.so").ok());
  }
  // Every run of the experiment `text`, run with `backend`, in the file's order.
  std::vector<absl::StatusOr<RunOutput>> RunAll(const std::string& text, Backend& backend) {
    const std::filesystem::path file = dir_ / "x.toml";
    WriteFile(file, text);
    std::vector<absl::StatusOr<RunOutput>> outs;
    auto ex = Experiment::Load(file, {});
    if (!ex.ok()) {
      outs.emplace_back(ex.status());
      return outs;
    }
    for (const RunSpec& spec : ex->runs()) {
      auto run = ResolveRun(spec, registry_, presets_);
      if (!run.ok()) {
        outs.emplace_back(run.status());
        continue;
      }
      outs.push_back(backend.Run(*run, registry_, RunControl{}));
    }
    return outs;
  }

  Registry registry_;
  PluginLoader loader_{registry_};
  PresetLibrary presets_{{TESTBED_TEST_CONFIG_DIR}};
  TempDir dir_;
};

// A run's metric, or -1 when it has none.
inline double MetricOf(const RunOutput& out, const char* name) {
  const Metric* m = out.metrics.Find(name);
  return m != nullptr ? m->value : -1.0;
}

// Column `column` of table `table` of a run (empty when either is missing).
template <typename T>
std::vector<T> ColumnOf(const RunOutput& out, const std::string& table, const std::string& column) {
  for (const Table& t : out.tables) {
    if (t.name != table) continue;
    const Column* c = t.Find(column);
    if (c != nullptr && std::holds_alternative<std::vector<T>>(c->values)) return std::get<std::vector<T>>(c->values);
  }
  return {};
}

}  // namespace testbed::testing
