// Speed work must not change what the simulator predicts. The experiment
// data/sim_regression.toml (six schedules or planners on three clusters) is run by the real
// `testbed` with the real plugins twice: transfer rates updated incrementally (the engine)
// and in full over every link (the former engine). Every metric of every run must be the
// same double in both, and the same as stored in data/sim_regression_metrics.txt (printed
// with 17 significant digits, which round-trips exactly). Wall-clock and memory metrics of
// the simulation itself are left out. Against the stored file a relative 1e-12 is allowed,
// for a libm whose last bit differs on another CPU (the stored values were bit-identical
// where they were written; the test says on stderr how many are not here).
//
// After a change that is meant to move results, regenerate the stored file with
//   TESTBED_REGENERATE=1 build/bin/sim_regression_test
// and say in the commit what moved and why.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "results/results_file.h"
#include "test_support.h"

namespace testbed {
namespace {

const std::string kData = TESTBED_TEST_DATA_DIR;

// Metrics about the simulation's own cost, which vary run to run.
bool Measured(const std::string& name) {
  return name == "schedule_build_s" || name == "simulation_wall_s" || name == "simulator_memory_mib" ||
         name == "process_peak_memory_mib" || name == "planning_time_s";
}

using Values = std::map<std::string, double>;  // "run metric" -> value

Values RunWith(const std::string& rate_updates, const testing::TempDir& dir) {
  const std::string out = (dir / (rate_updates + ".h5")).string();
  const std::string cmd =
      absl::StrCat("TESTBED_PLUGIN_PATH=", TESTBED_PLUGIN_DIR, " TESTBED_CONFIG_PATH=", TESTBED_TEST_CONFIG_DIR, " ",
                   TESTBED_EXE, " run ", kData, "/sim_regression.toml -q -o ", out,
                   " --set sim.rate_updates=", rate_updates, " > ", (dir / (rate_updates + ".log")).string(), " 2>&1");
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\n" << testing::ReadFile(dir / (rate_updates + ".log"));
  Values v;
  auto contents = ResultsFile::Read(out, false);
  EXPECT_TRUE(contents.ok()) << contents.status();
  if (!contents.ok()) return v;
  for (const StoredRun& run : contents->runs) {
    EXPECT_EQ(run.status, "ok") << run.id << ": " << run.error;
    for (const Metric& m : run.output.metrics.all()) {
      if (!Measured(m.name)) v[absl::StrCat(run.id, " ", m.name)] = m.value;
    }
  }
  return v;
}

std::string Format(const Values& v) {
  std::string text;
  for (const auto& [key, value] : v) absl::StrAppend(&text, key, " ", absl::StrFormat("%.17g", value), "\n");
  return text;
}

TEST(SimRegression, BothRateUpdatesMatchTheStoredMetricsBitForBit) {
  testing::TempDir dir;
  const Values incremental = RunWith("incremental", dir);
  const Values full = RunWith("full", dir);
  ASSERT_FALSE(incremental.empty());
  ASSERT_EQ(incremental.size(), full.size());
  for (const auto& [key, value] : incremental) {
    auto it = full.find(key);
    ASSERT_NE(it, full.end()) << key;
    EXPECT_EQ(value, it->second) << key << absl::StrFormat(": incremental %.17g, full %.17g", value, it->second);
  }
  const std::string stored_path = kData + "/sim_regression_metrics.txt";
  if (const char* regen = std::getenv("TESTBED_REGENERATE"); regen != nullptr && std::string(regen) == "1") {
    testing::WriteFile(stored_path, Format(incremental));
    GTEST_SKIP() << "wrote " << stored_path;
  }
  Values stored;
  for (absl::string_view line : absl::StrSplit(testing::ReadFile(stored_path), '\n', absl::SkipEmpty())) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ');
    ASSERT_EQ(f.size(), 3u) << stored_path << ": malformed line '" << line << "'";
    stored[f[0] + " " + f[1]] = std::strtod(f[2].c_str(), nullptr);
  }
  int inexact = 0;
  for (const auto& [key, value] : stored) {
    auto it = incremental.find(key);
    if (it == incremental.end()) {
      ADD_FAILURE() << key << ": stored but no longer reported";
      continue;
    }
    if (it->second == value) continue;
    ++inexact;
    EXPECT_NEAR(it->second, value, 1e-12 * std::abs(value))
        << key << absl::StrFormat(": now %.17g, stored %.17g", it->second, value);
  }
  if (inexact > 0) std::fprintf(stderr, "%d of %zu stored metrics differ in their last bits\n", inexact, stored.size());
  for (const auto& [key, value] : incremental) {
    EXPECT_TRUE(stored.count(key) == 1) << key << ": reported but not stored (regenerate the file)";
  }
}

}  // namespace
}  // namespace testbed
