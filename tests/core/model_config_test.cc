// Models of measured layers (family "layers"): inline and from a CSV file, each row costed as
// given; malformed input is named by file and line.
#include "config/model_config.h"

#include <sys/resource.h>

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"
#include "testbed/layer_kernels.h"
#include "testbed/plan_search.h"

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

namespace testbed {
namespace {

// Family "cnn" from TOML: conv blocks, dense layers and the classifier, each counted by hand.
// Per conv block (3x3, padding 1, ReLU, 2x2 pool): MACs = out_c x size^2 x in_c x 9, params
// out_c x (in_c x 9 + 1), activations 2 x (in_c + out_c) x size^2 + out_c x (size / 2)^2 bytes,
// output 2 x out_c x (size / 2)^2 bytes.
TEST(CnnModel, LayersParametersAndFlopsFromToml) {
  ErrorList errors;
  auto m = Resolve(R"([model]
name = "cnn"
family = "cnn"
channels = 1
image_size = 28
conv_channels = [4, 8]
layers = 1
hidden = 32
vocab = 10
)", "cnn.toml", errors);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  ASSERT_EQ(m->layers.size(), 4u);
  EXPECT_EQ(m->shape.inputs, 784);
  EXPECT_EQ(m->shape.seq_len, 1);
  const Layer& c0 = m->layers[0];
  EXPECT_EQ(c0.name, "conv0");
  EXPECT_EQ(c0.kind, LayerKind::kConv);
  EXPECT_STREQ(LayerKindName(c0.kind), "conv");
  EXPECT_EQ(c0.conv_in_channels, 1);
  EXPECT_EQ(c0.conv_out_channels, 4);
  EXPECT_EQ(c0.conv_image_size, 28);
  EXPECT_EQ(c0.params, 4 * 9 + 4);
  EXPECT_DOUBLE_EQ(c0.fwd_flops_per_sample, 2.0 * 4 * 784 * 9);  // 56,448
  EXPECT_DOUBLE_EQ(c0.bwd_flops_per_sample, 2.0 * c0.fwd_flops_per_sample);
  EXPECT_EQ(c0.activation_bytes_per_sample, 2 * 784 + 2 * 4 * 784 + 4 * 196);  // 8,624
  EXPECT_EQ(c0.output_bytes_per_sample, 2 * 4 * 196);
  EXPECT_EQ(c0.ffn_hidden, 784);
  EXPECT_EQ(c0.hidden, 4 * 196);
  const Layer& c1 = m->layers[1];
  EXPECT_EQ(c1.name, "conv1");
  EXPECT_EQ(c1.conv_in_channels, 4);
  EXPECT_EQ(c1.conv_image_size, 14);
  EXPECT_EQ(c1.params, 8 * 36 + 8);
  EXPECT_DOUBLE_EQ(c1.fwd_flops_per_sample, 2.0 * 8 * 196 * 36);  // 112,896
  EXPECT_EQ(c1.activation_bytes_per_sample, 2 * 4 * 196 + 2 * 8 * 196 + 8 * 49);
  EXPECT_EQ(c1.output_bytes_per_sample, 2 * 8 * 49);
  const Layer& d0 = m->layers[2];
  EXPECT_EQ(d0.name, "dense0");
  EXPECT_EQ(d0.kind, LayerKind::kDense);
  EXPECT_EQ(d0.ffn_hidden, 8 * 49);  // the flattened 8 x 7 x 7 feature map
  EXPECT_EQ(d0.params, 392 * 32 + 32);
  EXPECT_DOUBLE_EQ(d0.fwd_flops_per_sample, 2.0 * 392 * 32);
  EXPECT_EQ(d0.activation_bytes_per_sample, 2 * (392 + 32));
  const Layer& head = m->layers[3];
  EXPECT_EQ(head.name, "classifier");
  EXPECT_EQ(head.params, 32 * 10 + 10);
  EXPECT_EQ(head.output_bytes_per_sample, 2 * 10);
  EXPECT_EQ(m->TotalParams(), 40 + 296 + 12576 + 330);
  EXPECT_DOUBLE_EQ(m->FwdFlopsPerSample(), 56448.0 + 112896.0 + 25088.0 + 640.0);
  // Conv blocks and dense layers are the blocks planners split; the classifier joins the last.
  EXPECT_EQ(m->NumBlocks(), 3);
  EXPECT_EQ(c1.block, 1);
  EXPECT_EQ(d0.block, 2);
  EXPECT_EQ(head.block, -1);
  auto stages = UniformBlockStages(*m, 3);
  ASSERT_TRUE(stages.ok()) << stages.status();
  ASSERT_EQ(stages->size(), 3u);
  EXPECT_EQ((*stages)[2].first_layer, 2);
  EXPECT_EQ((*stages)[2].end_layer, 4);
  // The device models cost a conv block as one GEMM of the graph's FLOPs (two in backward)
  // and the memory-bound im2col, ReLU and pooling.
  for (Phase phase : {Phase::kForward, Phase::kBackward}) {
    LayerWork work;
    work.layer = &c1;
    work.phase = phase;
    work.micro_batch = 8;
    double gemm_flops = 0;
    int memory_kernels = 0;
    for (const Kernel& k : LayerKernels(work)) {
      if (k.kind == KernelKind::kGemm) gemm_flops += k.flops;
      if (k.kind == KernelKind::kMemory) ++memory_kernels;
      EXPECT_GT(k.bytes, 0) << k.name;
    }
    const double per_sample = phase == Phase::kForward ? c1.fwd_flops_per_sample : c1.bwd_flops_per_sample;
    EXPECT_DOUBLE_EQ(gemm_flops, 8 * per_sample);
    EXPECT_EQ(memory_kernels, 3);
  }
}

// No dense layers: the classifier reads the last feature map; `hidden` is not needed.
TEST(CnnModel, ZeroDenseLayersNeedNoHidden) {
  ErrorList errors;
  auto m = Resolve("[model]\nfamily = \"cnn\"\nimage_size = 8\nconv_channels = [4]\nlayers = 0\nvocab = 10\n",
                   "c.toml", errors);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  ASSERT_EQ(m->layers.size(), 2u);
  EXPECT_EQ(m->layers[1].name, "classifier");
  EXPECT_EQ(m->layers[1].ffn_hidden, 4 * 16);
  EXPECT_EQ(m->TotalParams(), (4 * 9 + 4) + (64 * 10 + 10));
}

// An mlp of no hidden layers is a linear model (the classifier alone) and needs no `hidden`; an
// mlp's layers, which have no transformer blocks, are split over stages like blocks.
TEST(MlpModel, ZeroHiddenLayersIsALinearModelAndLayersSplitOverStages) {
  ErrorList errors;
  auto linear = Resolve("[model]\nfamily = \"mlp\"\nlayers = 0\ninputs = 64\nvocab = 10\n", "l.toml", errors);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  ASSERT_EQ(linear->layers.size(), 1u);
  EXPECT_EQ(linear->layers[0].name, "classifier");
  EXPECT_EQ(linear->TotalParams(), 64 * 10 + 10);
  auto one = UniformBlockStages(*linear, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)[0].end_layer, 1);
  auto mlp = Resolve("[model]\nfamily = \"mlp\"\nlayers = 1\nhidden = 8\ninputs = 4\nvocab = 2\n", "m.toml", errors);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  auto two = UniformBlockStages(*mlp, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].end_layer, 1);
  EXPECT_EQ((*two)[1].first_layer, 1);
  EXPECT_EQ((*two)[1].end_layer, 2);
  EXPECT_FALSE(UniformBlockStages(*mlp, 3).ok());
  ErrorList missing;
  EXPECT_EQ(Resolve("[model]\nfamily = \"mlp\"\nlayers = 2\ninputs = 4\nvocab = 2\n", "h.toml", missing), nullptr);
  EXPECT_THAT(std::string(missing.ToStatus().message()), HasSubstr("missing required key 'hidden'"));
}

std::string CnnError(const std::string& keys) {
  ErrorList errors;
  auto m = Resolve("[model]\nfamily = \"cnn\"\nvocab = 10\n" + keys, "bad.toml", errors);
  EXPECT_EQ(m, nullptr) << keys;
  return std::string(errors.ToStatus().message());
}

TEST(CnnModel, BadShapesNameTheKey) {
  // Three blocks halve 4 pixels three times.
  EXPECT_THAT(CnnError("image_size = 4\nconv_channels = [2, 2, 2]\nlayers = 0\n"),
              HasSubstr("image_size 4 is too small for 3 conv blocks: each 2x2 max-pooling halves the image, so "
                        "image_size must be >= 8"));
  EXPECT_THAT(CnnError("image_size = 8\nconv_channels = []\nlayers = 0\n"),
              HasSubstr("bad.toml:5:17: [model]: 'conv_channels' needs at least one entry"));
  EXPECT_THAT(CnnError("image_size = 8\nconv_channels = [4, -1]\nlayers = 0\n"),
              HasSubstr("bad.toml:5:17: [model]: 'conv_channels': expected list of int in [1"));
  EXPECT_THAT(CnnError("image_size = 8\nconv_channels = [0]\nlayers = 0\n"), HasSubstr("'conv_channels': expected"));
  EXPECT_THAT(CnnError("conv_channels = [4]\nlayers = 0\n"), HasSubstr("missing required key 'image_size'"));
  EXPECT_THAT(CnnError("image_size = 8\nlayers = 0\n"), HasSubstr("missing required key 'conv_channels'"));
  EXPECT_THAT(CnnError("image_size = 8\nconv_channels = [4]\nlayers = 2\n"),
              HasSubstr("hidden must be >= 1 (the width of the dense layers; layers > 0)"));
  EXPECT_THAT(CnnError("image_size = 8\nconv_channels = [4]\nlayers = 0\ninputs = 100\n"),
              HasSubstr("inputs (100) must be channels x image_size^2 = 64"));
  // The conv keys belong to the cnn; other families still need layers >= 1.
  ErrorList mlp;
  EXPECT_EQ(Resolve("[model]\nfamily = \"mlp\"\nlayers = 1\nhidden = 8\ninputs = 4\nvocab = 2\nimage_size = 8\n",
                    "m.toml", mlp),
            nullptr);
  EXPECT_THAT(std::string(mlp.ToStatus().message()), HasSubstr("'image_size' is a key of family \"cnn\", not \"mlp\""));
  ErrorList gpt;
  EXPECT_EQ(Resolve("[model]\nlayers = 0\nhidden = 64\nheads = 4\n", "g.toml", gpt), nullptr);
  EXPECT_THAT(std::string(gpt.ToStatus().message()), HasSubstr("layers must be >= 1"));
}

}  // namespace
}  // namespace testbed
