// The plugin loader against real libraries built for the tests (tests/fixtures/plugins):
// a good plugin, a wrong ABI version, a register callback that fails half-way, components
// that fail or throw at run time, and two libraries exporting the same symbol names.
#include "engine/plugin_loader.h"

#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/stage_costs.h"
#include "small_world.h"
#include "test_support.h"
#include "testbed/partitioner.h"
#include "testbed/plugin.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kGood = std::filesystem::path(TESTBED_TEST_PLUGIN_DIR) / "good";
const std::filesystem::path kBad = std::filesystem::path(TESTBED_TEST_PLUGIN_DIR) / "bad";

std::string Good(const std::string& lib) { return (kGood / (lib + ".so")).string(); }
std::string Bad(const std::string& lib) { return (kBad / (lib + ".so")).string(); }

// Plans the small model with `name` from `registry` and returns the plan's planner metrics.
absl::StatusOr<Plan> PlanWith(const Registry& registry, const std::string& name, const ParamSet& params = {}) {
  auto part = registry.Create<Partitioner>(name, params);
  if (!part.ok()) return part.status();
  static const ModelGraph model = testing::SmallModel();
  static const Cluster cluster = testing::SmallCluster();
  static const testing::NullDeviceModel dm;
  TrainSettings train;
  ParallelSettings par;
  PlanningContext ctx{model, cluster, train, par, dm, 1, {}};
  return CallPlugin("partitioner", name, [&] { return (*part)->Partition(ctx); });
}

TEST(PluginLoaderTest, GoodPluginRegistersItsComponents) {
  Registry registry;
  PluginLoader loader(registry);
  auto loaded = loader.Load(Good("fixture_good"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->name, "fixture");
  EXPECT_EQ(loaded->version, "1.2.3");
  EXPECT_EQ(loaded->path, Good("fixture_good"));
  EXPECT_THAT(loaded->description, HasSubstr("uniform partitioner"));
  ASSERT_EQ(loader.loaded().size(), 1u);

  const ComponentEntry* part = registry.Find(ComponentKind::kPartitioner, "fixture.uniform");
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->plugin, "fixture");
  EXPECT_EQ(part->library_path, Good("fixture_good"));
  ASSERT_EQ(part->decl.params.size(), 2u);
  EXPECT_EQ(part->decl.params[0].name(), "micro_batch");
  EXPECT_EQ(part->decl.params[0].unit(), "samples");
  const ComponentEntry* dm = registry.Find(ComponentKind::kDeviceModel, "fixture.flops");
  ASSERT_NE(dm, nullptr);
  EXPECT_EQ(dm->plugin, "fixture");

  ParamSet params;
  params.Set("micro_batch", std::int64_t{3});
  params.Set("recompute_first", false);
  auto plan = PlanWith(registry, "fixture.uniform", params);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->micro_batch, 3);
  EXPECT_TRUE(plan->Validate(static_cast<int>(testing::SmallModel().layers.size()), testing::SmallCluster()).ok());
}

TEST(PluginLoaderTest, SamePluginTwiceIsRefused) {
  Registry registry;
  PluginLoader loader(registry);
  ASSERT_TRUE(loader.Load(Good("fixture_good")).ok());
  auto again = loader.Load(Good("fixture_good"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("a plugin named 'fixture' is already loaded"));
  EXPECT_EQ(loader.loaded().size(), 1u);
  EXPECT_NE(registry.Find(ComponentKind::kPartitioner, "fixture.uniform"), nullptr);
}

TEST(PluginLoaderTest, WrongAbiVersionIsRefusedNamingBothVersions) {
  Registry registry;
  PluginLoader loader(registry);
  // The fixture's register callback aborts: reaching it would end this test process.
  auto loaded = loader.Load(Bad("fixture_abi999"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(loaded.status().message());
  EXPECT_THAT(msg, HasSubstr(Bad("fixture_abi999")));
  EXPECT_THAT(msg, HasSubstr("ABI version 999"));
  EXPECT_THAT(msg, HasSubstr("ABI version " + std::to_string(kAbiVersion)));
  EXPECT_TRUE(loader.loaded().empty());
  EXPECT_TRUE(registry.ListAll().empty());
  // The refused library does not block a plugin loaded after it.
  EXPECT_TRUE(loader.Load(Good("fixture_good")).ok());
}

TEST(PluginLoaderTest, AnotherBuildIdentityIsRefusedNamingBoth) {
  Registry registry;
  PluginLoader loader(registry);
  auto loaded = loader.Load(Bad("fixture_other_build"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(loaded.status().message());
  EXPECT_THAT(msg, HasSubstr("plugin built as 'testbed 0.1.0; gcc 99; libstdc++ 99 cxx11-abi 0; abseil 1 x'"));
  EXPECT_THAT(msg, HasSubstr(std::string("this testbed is '") + kBuildIdentity + "'"));
  EXPECT_TRUE(registry.ListAll().empty());
  // The good fixture carries this build's identity, and the loader records it.
  auto good = loader.Load(Good("fixture_good"));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->build, kBuildIdentity);
  EXPECT_THAT(good->build, HasSubstr("testbed "));
  EXPECT_THAT(good->build, HasSubstr("abseil "));
}

TEST(PluginLoaderTest, FailedRegisterLeavesNothingRegistered) {
  Registry registry;
  PluginLoader loader(registry);
  auto loaded = loader.Load(Bad("fixture_rollback"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kUnavailable);  // the plugin's own code
  const std::string msg(loaded.status().message());
  EXPECT_THAT(msg, HasSubstr(Bad("fixture_rollback")));
  EXPECT_THAT(msg, HasSubstr("plugin 'fixture_rollback' failed to register"));
  EXPECT_THAT(msg, HasSubstr("gives up after adding two components"));
  EXPECT_EQ(registry.Find(ComponentKind::kPartitioner, "fixture.rollback_partitioner"), nullptr);
  EXPECT_EQ(registry.Find(ComponentKind::kDeviceModel, "fixture.rollback_device_model"), nullptr);
  EXPECT_TRUE(registry.ListAll().empty());
  EXPECT_TRUE(loader.loaded().empty());
}

TEST(PluginLoaderTest, ComponentClashRollsBackTheWholePlugin) {
  Registry registry;
  ASSERT_TRUE(registry
                  .AddEntry(ComponentDecl{ComponentKind::kDeviceModel, "fixture.flops", "already here", {}},
                            [](const ParamSet&) -> absl::StatusOr<std::unique_ptr<Component>> {
                              return absl::InternalError("placeholder");
                            })
                  .ok());
  PluginLoader loader(registry);
  auto loaded = loader.Load(Good("fixture_good"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("device_model 'fixture.flops' is already registered"));
  // fixture.uniform was added before the clash and must be gone; the core's entry stays.
  EXPECT_EQ(registry.Find(ComponentKind::kPartitioner, "fixture.uniform"), nullptr);
  ASSERT_NE(registry.Find(ComponentKind::kDeviceModel, "fixture.flops"), nullptr);
  EXPECT_EQ(registry.Find(ComponentKind::kDeviceModel, "fixture.flops")->plugin, "core");
  EXPECT_TRUE(loader.loaded().empty());
}

TEST(PluginLoaderTest, FilesThatAreNotPluginsAreRefused) {
  Registry registry;
  PluginLoader loader(registry);
  testing::TempDir dir;
  const auto garbage = dir / "garbage.so";
  testing::WriteFile(garbage, "this is not an ELF file");
  auto a = loader.Load(garbage);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("cannot load the library"));

  auto b = loader.Load(TESTBED_TEST_CORE_LIBRARY);  // a real library without the entry
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("not a testbed plugin"));

  auto c = loader.Load(dir / "missing.so");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.ListAll().empty());
}

TEST(PluginLoaderTest, TwinLibrariesEachRunTheirOwnCode) {
  for (bool a_first : {true, false}) {
    Registry registry;
    PluginLoader loader(registry);
    for (const char* lib : a_first ? std::vector<const char*>{"fixture_twin_a", "fixture_twin_b"}
                                   : std::vector<const char*>{"fixture_twin_b", "fixture_twin_a"}) {
      auto loaded = loader.Load(Good(lib));
      ASSERT_TRUE(loaded.ok()) << loaded.status();
    }
    EXPECT_EQ(registry.Find(ComponentKind::kPartitioner, "fixture.twin1")->library_path, Good("fixture_twin_a"));
    EXPECT_EQ(registry.Find(ComponentKind::kPartitioner, "fixture.twin2")->library_path, Good("fixture_twin_b"));
    for (int id : {1, 2}) {
      auto plan = PlanWith(registry, "fixture.twin" + std::to_string(id));
      ASSERT_TRUE(plan.ok()) << plan.status();
      for (const char* m : {"twin_compiled", "twin_function", "twin_variable", "twin_method"}) {
        const Metric* metric = plan->planner_metrics.Find(m);
        ASSERT_NE(metric, nullptr) << m;
        EXPECT_EQ(metric->value, id) << m << " of fixture.twin" << id << (a_first ? " (a loaded first)" : " (b first)");
      }
    }
  }
}

TEST(PluginLoaderTest, RunTimeFailuresBecomeErrors) {
  Registry registry;
  PluginLoader loader(registry);
  ASSERT_TRUE(loader.Load(Good("fixture_failing")).ok());

  auto fails = PlanWith(registry, "fixture.fails");
  EXPECT_EQ(fails.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(fails.status().message()), HasSubstr("fixture.fails: no plan fits"));

  ParamSet at_partition;
  at_partition.Set("where", std::string("partition"));
  auto thrown = PlanWith(registry, "fixture.throws", at_partition);
  EXPECT_EQ(thrown.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(thrown.status().message()),
              HasSubstr("partitioner 'fixture.throws' threw: fixture.throws: thrown from Partition"));

  ParamSet at_create;
  at_create.Set("where", std::string("create"));
  auto created = registry.Create<Partitioner>("fixture.throws", at_create);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(created.status().message()),
              HasSubstr("partitioner 'fixture.throws' (plugin fixture_failing) threw while being created: "
                        "fixture.throws: thrown from the factory"));
}

TEST(PluginLoaderTest, LoadDirectoriesCollectsFailuresAndSkipsRepeats) {
  Registry registry;
  PluginLoader loader(registry);
  loader.LoadDirectories({kGood, kBad, kGood, "/nonexistent/dir"});
  std::vector<std::string> names;
  for (const LoadedPlugin& p : loader.loaded()) names.push_back(p.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"fixture", "fixture_failing", "fixture_slow", "fixture_twin1",
                                             "fixture_twin2"}));
  // The good directory seen again adds no failure; a directory that does not exist does.
  ASSERT_EQ(loader.failures().size(), 4u);
  EXPECT_EQ(loader.failures()[0].path, Bad("fixture_abi999"));
  EXPECT_THAT(loader.failures()[0].error, HasSubstr("ABI version 999"));
  EXPECT_EQ(loader.failures()[1].path, Bad("fixture_other_build"));
  EXPECT_THAT(loader.failures()[1].error, HasSubstr("gcc 99"));
  EXPECT_EQ(loader.failures()[2].path, Bad("fixture_rollback"));
  EXPECT_EQ(loader.failures()[3].path, "/nonexistent/dir");
  EXPECT_THAT(loader.failures()[3].error, HasSubstr("plugin search path entry is not a directory"));
  EXPECT_EQ(registry.Find(ComponentKind::kPartitioner, "fixture.rollback_partitioner"), nullptr);
}

TEST(PluginLoaderTest, InstancesOutliveLoaderAndRegistry) {
  std::shared_ptr<Partitioner> part;
  {
    Registry registry;
    PluginLoader loader(registry);
    ASSERT_TRUE(loader.Load(Good("fixture_good")).ok());
    ParamSet params;
    params.Set("micro_batch", std::int64_t{0});
    params.Set("recompute_first", true);
    auto made = registry.Create<Partitioner>("fixture.uniform", params);
    ASSERT_TRUE(made.ok());
    part = *made;
  }
  // The plugin's code must still be mapped: call into it, then destroy the instance.
  const ModelGraph model = testing::SmallModel();
  const Cluster cluster = testing::SmallCluster();
  const testing::NullDeviceModel dm;
  TrainSettings train;
  ParallelSettings par;
  auto plan = part->Partition(PlanningContext{model, cluster, train, par, dm, 1, {}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->Chunk(0, 0).recompute_layers, 1);
  part.reset();
}

TEST(PluginLoaderTest, SearchPathIsTheEnvironmentThenTheInstallLayout) {
  const char* old = std::getenv("TESTBED_PLUGIN_PATH");
  const std::string saved = old ? old : "";
  ::setenv("TESTBED_PLUGIN_PATH", "/first:/second::", 1);
  auto dirs = PluginLoader::DefaultSearchPath("/opt/tb/bin/testbed");
  if (old) ::setenv("TESTBED_PLUGIN_PATH", saved.c_str(), 1); else ::unsetenv("TESTBED_PLUGIN_PATH");
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], "/first");
  EXPECT_EQ(dirs[1], "/second");
  EXPECT_EQ(dirs[2], std::filesystem::path("/opt/tb/lib/testbed/plugins"));
}

}  // namespace
}  // namespace testbed
