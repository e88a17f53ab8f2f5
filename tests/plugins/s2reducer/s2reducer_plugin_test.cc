// The built plugin loads, registers `s2reducer` with its parameters, and its defaults work.
#include <gtest/gtest.h>

#include <vector>

#include "engine/plugin_loader.h"
#include "testbed/compressor.h"
#include "testbed/registry.h"

namespace testbed {
namespace {

ParamSet Defaults(const ComponentEntry& entry) {
  ParamSet ps;
  for (const ParamSpec& spec : entry.decl.params) ps.Set(spec.name(), spec.default_value());
  return ps;
}

TEST(S2ReducerPlugin, RegistersACompressorThatRoundTrips) {
  Registry registry;
  PluginLoader loader(registry);
  auto loaded = loader.Load(S2REDUCER_PLUGIN_FILE);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ComponentEntry* entry = registry.Find(ComponentKind::kCompressor, "s2reducer");
  ASSERT_NE(entry, nullptr);
  for (const char* name : {"rows", "columns", "ratio", "seed", "elements", "device"}) {
    bool found = false;
    for (const ParamSpec& spec : entry->decl.params) found = found || spec.name() == name;
    EXPECT_TRUE(found) << name;
  }
  auto c = registry.Create<Compressor>("s2reducer", Defaults(*entry));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> g(4096, 0.0f);
  g[100] = 0.5f;
  auto p = (*c)->Encode(g, {});
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<float> out(g.size());
  ASSERT_TRUE((*c)->Decode({&*p, 1}, {1, false}, out).ok());
  // One non-zero cannot collide with anything: recovered exactly.
  EXPECT_EQ(out, g);
}

TEST(S2ReducerPlugin, CudaDeviceIsRefusedClearlyWhereUnavailable) {
  Registry registry;
  PluginLoader loader(registry);
  ASSERT_TRUE(loader.Load(S2REDUCER_PLUGIN_FILE).ok());
  const ComponentEntry* entry = registry.Find(ComponentKind::kCompressor, "s2reducer");
  ASSERT_NE(entry, nullptr);
  ParamSet ps = Defaults(*entry);
  ps.Set("device", std::string("cuda"));
  auto c = registry.Create<Compressor>("s2reducer", ps);
  if (c.ok()) GTEST_SKIP() << "a GPU is available here";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
}

}  // namespace
}  // namespace testbed
