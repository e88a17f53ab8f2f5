// The built plugin registers the compressor `none`.
#include <gtest/gtest.h>

#include <vector>

#include "engine/plugin_loader.h"
#include "testbed/compressor.h"
#include "testbed/registry.h"

namespace testbed {
namespace {

TEST(DenseAllReducePlugin, RegistersTheNoneCompressor) {
  Registry registry;
  PluginLoader loader(registry);
  auto loaded = loader.Load(DENSE_PLUGIN_FILE);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ComponentEntry* entry = registry.Find(ComponentKind::kCompressor, "none");
  ASSERT_NE(entry, nullptr);
  ParamSet ps;
  for (const ParamSpec& spec : entry->decl.params) ps.Set(spec.name(), spec.default_value());
  auto c = registry.Create<Compressor>("none", ps);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<float> g = {1.0f, -2.5f, 0.0f};
  auto p = (*c)->Encode(g, {});
  ASSERT_TRUE(p.ok());
  std::vector<float> out(3);
  ASSERT_TRUE((*c)->Decode({&*p, 1}, {1, false}, out).ok());
  EXPECT_EQ(out, g);
}

}  // namespace
}  // namespace testbed
