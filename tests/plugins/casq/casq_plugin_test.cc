// The built plugin loads and registers `casq`; its defaults work end to end.
#include <gtest/gtest.h>

#include <vector>

#include "engine/plugin_loader.h"
#include "testbed/compressor.h"
#include "testbed/registry.h"

namespace testbed {
namespace {

TEST(CasqPlugin, RegistersACompressorThatRoundTrips) {
  Registry registry;
  PluginLoader loader(registry);
  auto loaded = loader.Load(CASQ_PLUGIN_FILE);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ComponentEntry* entry = registry.Find(ComponentKind::kCompressor, "casq");
  ASSERT_NE(entry, nullptr);
  ParamSet ps;
  for (const ParamSpec& spec : entry->decl.params) ps.Set(spec.name(), spec.default_value());
  auto c = registry.Create<Compressor>("casq", ps);
  ASSERT_TRUE(c.ok()) << c.status();
  // The extremes are levels themselves, so they decode exactly; the bitmap keeps zeros zero,
  // dense positions round them (unbiasedly) to the levels around zero.
  std::vector<float> g(1000, 0.0f);
  g[1] = -2.0f;
  g[500] = 1.0f;
  g[999] = 3.0f;
  ps.Set("positions", std::string("dense"));
  auto dense = registry.Create<Compressor>("casq", ps);
  ASSERT_TRUE(dense.ok());
  for (const std::shared_ptr<Compressor>& comp : {*c, *dense}) {
    auto p = comp->Encode(g, {});
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<float> out(g.size());
    ASSERT_TRUE(comp->Decode({&*p, 1}, {1, false}, out).ok());
    EXPECT_EQ(out[1], -2.0f);
    EXPECT_EQ(out[999], 3.0f);
    EXPECT_GE(out[500], -2.0f);
    EXPECT_LE(out[500], 3.0f);
  }
  std::vector<float> out(g.size());
  auto p = (*c)->Encode(g, {});
  ASSERT_TRUE(p.ok() && (*c)->Decode({&*p, 1}, {1, false}, out).ok());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[998], 0.0f);
}

}  // namespace
}  // namespace testbed
