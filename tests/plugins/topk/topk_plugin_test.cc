// The built plugin loads and registers `topk`; its defaults work end to end.
#include <gtest/gtest.h>

#include <vector>

#include "engine/plugin_loader.h"
#include "testbed/compressor.h"
#include "testbed/registry.h"

namespace testbed {
namespace {

TEST(TopKPlugin, RegistersACompressorThatRoundTrips) {
  Registry registry;
  PluginLoader loader(registry);
  auto loaded = loader.Load(TOPK_PLUGIN_FILE);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ComponentEntry* entry = registry.Find(ComponentKind::kCompressor, "topk");
  ASSERT_NE(entry, nullptr);
  ParamSet ps;
  for (const ParamSpec& spec : entry->decl.params) ps.Set(spec.name(), spec.default_value());
  ps.Set("k", std::int64_t{2});
  auto c = registry.Create<Compressor>("topk", ps);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<float> g = {0.0f, 3.0f, -1.0f, 0.5f, -4.0f};
  auto p = (*c)->Encode(g, {});
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<float> out(g.size());
  ASSERT_TRUE((*c)->Decode({&*p, 1}, {1, false}, out).ok());
  EXPECT_EQ(out, (std::vector<float>{0.0f, 3.0f, 0.0f, 0.0f, -4.0f}));
}

}  // namespace
}  // namespace testbed
