// Models of measured layers (family "layers"): inline and from a CSV file, each row costed as
// given; malformed input is named by file and line.
#include "config/model_config.h"

#include <sys/resource.h>

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const ModelGraph> Resolve(const std::string& toml, const std::string& file, ErrorList& errors) {
  auto doc = ConfigDoc::ParseString(toml, file);
  EXPECT_TRUE(doc.ok()) << doc.status();
  PresetLibrary presets({});
  return ResolveModel(*doc, {"model"}, presets, errors);
}

TEST(GivenLayers, InlineLayersRepeatWithoutEmbeddingOrHead) {
  ErrorList errors;
  auto m = Resolve(R"([model]
family = "layers"
given = [{ name = "block", fwd_ms = 2.4, bwd_ms = 4.8, params = 50331648, output_mib = 8, repeat = 3 },
         { name = "loss", fwd_ms = 0.5, bwd_ms = 0.25 }]
)", "m.toml", errors);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  ASSERT_EQ(m->layers.size(), 4u);
  EXPECT_EQ(m->layers[0].name, "block0");
  EXPECT_EQ(m->layers[2].name, "block2");
  EXPECT_EQ(m->layers[3].name, "loss");
  EXPECT_DOUBLE_EQ(m->layers[1].given_fwd_s, 2.4e-3);
  EXPECT_DOUBLE_EQ(m->layers[3].given_bwd_s, 0.25e-3);
  EXPECT_EQ(m->layers[0].params, 50331648);
  EXPECT_EQ(m->layers[0].output_bytes_per_sample, 8 << 20);
  EXPECT_EQ(m->TotalParams(), 3 * 50331648);
}

TEST(GivenLayers, FromACsvFileNextToTheExperiment) {
  testing::TempDir dir;
  testing::WriteFile(dir / "times.csv", "# measured on one device\nname,fwd_ms,bwd_ms,params,repeat\nattn,1.5,3,100,2\nmlp,2,4,200,1\n");
  ErrorList errors;
  auto m = Resolve("[model]\nfamily = \"layers\"\ngiven_csv = \"times.csv\"\n", (dir / "x.toml").string(), errors);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  ASSERT_EQ(m->layers.size(), 3u);
  EXPECT_EQ(m->layers[1].name, "attn1");
  EXPECT_DOUBLE_EQ(m->layers[2].given_bwd_s, 4e-3);
  EXPECT_EQ(m->layers[2].params, 200);
}

TEST(GivenLayers, AMalformedRowNamesTheFileAndLine) {
  testing::TempDir dir;
  testing::WriteFile(dir / "bad.csv", "name,fwd_ms,bwd_ms\nok,1,2\nbroken,fast,2\nshort,1\n");
  ErrorList errors;
  auto m = Resolve("[model]\nfamily = \"layers\"\ngiven_csv = \"bad.csv\"\n", (dir / "x.toml").string(), errors);
  EXPECT_EQ(m, nullptr);
  const std::string msg(errors.ToStatus().message());
  EXPECT_THAT(msg, HasSubstr((dir / "bad.csv").string() + ":3: 'fwd_ms': expected float >= 0.0 (ms), got 'fast'"));
  EXPECT_THAT(msg, HasSubstr((dir / "bad.csv").string() + ":4: 2 fields; the header has 3"));
}

TEST(GivenLayers, ShapesStillNeedTheirDimensionsAndLayersTheirList) {
  ErrorList errors;
  EXPECT_EQ(Resolve("[model]\nhidden = 64\nheads = 4\n", "m.toml", errors), nullptr);
  EXPECT_THAT(std::string(errors.ToStatus().message()), HasSubstr("[model]: missing required key 'layers'"));
  ErrorList none;
  EXPECT_EQ(Resolve("[model]\nfamily = \"layers\"\n", "m.toml", none), nullptr);
  EXPECT_THAT(std::string(none.ToStatus().message()), HasSubstr("needs 'given' layers or a 'given_csv' file"));
}

}  // namespace
}  // namespace testbed

namespace testbed {
namespace {

// A model whose graph would not fit (2^24 blocks: 33.5 million layer records, about 11 GB)
// is refused with its estimate before anything is built, for shapes and for given layers;
// here under a 3 GB address-space limit, so the test does not depend on the machine.
TEST(ModelSize, AGraphTooLargeForMemoryIsRefusedBeforeItIsBuilt) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "an address-space limit and a sanitizer's shadow memory do not mix";
#endif
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = std::min<rlim_t>(saved.rlim_max, rlim_t{3} << 30);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  ErrorList errors, given_errors;
  Resolve(R"([model]
family = "gpt"
layers = 16777216
hidden = 1024
heads = 16
seq_len = 1024
vocab = 50257
)", "big.toml", errors);
  Resolve(R"([model]
family = "layers"
given = [{ name = "a", fwd_ms = 1.0, bwd_ms = 2.0, repeat = 16777216 },
         { name = "b", fwd_ms = 1.0, bwd_ms = 2.0, repeat = 16777216 }]
)", "given.toml", given_errors);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
  ASSERT_FALSE(errors.empty());
  const std::string msg(errors.ToStatus().message());
  EXPECT_THAT(msg, HasSubstr("big.toml:3:10"));  // at the key that made it so
  EXPECT_THAT(msg, HasSubstr("layers) is too large for this machine"));
  EXPECT_THAT(msg, HasSubstr("GiB are allowed"));
  ASSERT_FALSE(given_errors.empty());
  EXPECT_THAT(std::string(given_errors.ToStatus().message()), HasSubstr("is too large for this machine"));
}

// Counts whose derived sizes would overflow 64-bit integers are refused by name, not wrapped.
TEST(ModelSize, ShapesWhoseSizesOverflowAreRefused) {
  ErrorList errors;
  Resolve(R"([model]
family = "gpt"
layers = 16777216
hidden = 16777216
heads = 16
)", "wide.toml", errors);
  ASSERT_FALSE(errors.empty());
  EXPECT_THAT(std::string(errors.ToStatus().message()), HasSubstr("parameters, more than the 1e17"));
  ErrorList range;
  Resolve("[model]\nfamily = \"gpt\"\nlayers = 2\nhidden = 1000000000000\nheads = 16\n", "r.toml", range);
  ASSERT_FALSE(range.empty());
  EXPECT_THAT(std::string(range.ToStatus().message()), HasSubstr("'hidden': expected int in [1, 16777216]"));
}

}  // namespace
}  // namespace testbed
