// The built plugin, loaded the way the testbed loads it: one component `calibrated` of kind
// device_model with documented parameters, giving the same times as the fitting code, and
// reporting a bad `measurements` file as an error that names it.
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "calibrated_model.h"
#include "engine/plugin_loader.h"
#include "testbed/device_model.h"
#include "testbed/registry.h"

namespace testbed::calibrated {
namespace {

class CalibratedPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = loader_.Load(TESTBED_CALIBRATED_PLUGIN);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->name, "calibrated");
    entry_ = registry_.Find(ComponentKind::kDeviceModel, "calibrated");
    ASSERT_NE(entry_, nullptr);
  }
  // Declared defaults, with `overrides` applied.
  ParamSet Params(std::map<std::string, ParamValue> overrides = {}) const {
    ParamSet ps;
    for (const ParamSpec& spec : entry_->decl.params) ps.Set(spec.name(), spec.default_value());
    for (auto& [k, v] : overrides) ps.Set(k, v);
    return ps;
  }

  Registry registry_;
  PluginLoader loader_{registry_};
  const ComponentEntry* entry_ = nullptr;
};

TEST_F(CalibratedPluginTest, DeclaresDocumentedParameters) {
  std::map<std::string, ParamType> expected = {
      {"measurements", ParamType::kString},       {"device", ParamType::kString},
      {"device_peak_tflops", ParamType::kDouble}, {"device_memory_bandwidth_gb_per_s", ParamType::kDouble},
      {"seq_len", ParamType::kInt},               {"head_dim", ParamType::kInt}};
  ASSERT_EQ(entry_->decl.params.size(), expected.size());
  for (const ParamSpec& spec : entry_->decl.params) {
    ASSERT_EQ(expected.count(spec.name()), 1u) << spec.name();
    EXPECT_EQ(spec.type(), expected[spec.name()]) << spec.name();
    EXPECT_FALSE(spec.doc().empty()) << spec.name();
  }
  EXPECT_FALSE(entry_->decl.doc.empty());
}

TEST_F(CalibratedPluginTest, DefaultsGiveTheEmbeddedFit) {
  auto model = registry_.Create<DeviceModel>("calibrated", Params());
  ASSERT_TRUE(model.ok()) << model.status();

  auto rows = ParseMeasurements(EmbeddedMeasurementsCsv(), kEmbeddedMeasurementsName);
  ASSERT_TRUE(rows.ok());
  auto cal = FitCalibration(*rows, CalibrationSetup{});
  ASSERT_TRUE(cal.ok());
  const CalibratedModel direct(*cal);

  ModelShape s;
  s.name = "gpt-3072";
  s.layers = 1;
  s.hidden = 3072;  // absent from the file
  s.heads = 48;
  s.seq_len = 1024;
  s.vocab = 50257;
  auto g = BuildModelGraph(s);
  ASSERT_TRUE(g.ok());
  DeviceSpec d;
  d.name = "rtx3090";
  d.peak_flops = {{Precision::kFp16, 71e12}};
  d.memory_bandwidth_bytes_per_s = 936.2e9;
  for (const Layer& l : g->layers) {
    LayerWork w;
    w.layer = &l;
    w.phase = Phase::kBackward;
    w.micro_batch = 4;
    w.tp = 4;
    auto via_plugin = (*model)->LayerTime(w, d);
    auto via_lib = direct.LayerTime(w, d);
    ASSERT_TRUE(via_plugin.ok() && via_lib.ok()) << l.name;
    EXPECT_DOUBLE_EQ(*via_plugin, *via_lib) << l.name;
  }
}

TEST_F(CalibratedPluginTest, MeasurementsFileParameter) {
  const auto dir = std::filesystem::temp_directory_path() / ("calibrated-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto good = dir / "ops.csv", bad = dir / "bad.csv";
  {
    // The embedded file without its 4096 rows: a different fit, still valid.
    std::ofstream out(good);
    std::string text(EmbeddedMeasurementsCsv());
    std::size_t start = 0;
    for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
      const std::string line = text.substr(start, end - start);
      if (line.rfind("4096,", 0) != 0) out << line << '\n';
    }
    std::ofstream(bad) << "hidden,tp,micro_batch\n1024,1,1\n";
  }
  auto from_file = registry_.Create<DeviceModel>("calibrated", Params({{"measurements", good.string()}}));
  EXPECT_TRUE(from_file.ok()) << from_file.status();

  auto broken = registry_.Create<DeviceModel>("calibrated", Params({{"measurements", bad.string()}}));
  EXPECT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(bad.string()), std::string::npos) << broken.status();

  auto missing = registry_.Create<DeviceModel>("calibrated", Params({{"measurements", (dir / "none.csv").string()}}));
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.csv"), std::string::npos) << missing.status();

  // A head size that does not divide the measured hidden sizes is an impossible calibration.
  auto odd = registry_.Create<DeviceModel>("calibrated", Params({{"head_dim", std::int64_t{96}}}));
  EXPECT_FALSE(odd.ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed::calibrated
