// DPC's width rule on model graphs: widths never increase with capacity, the edges stay wide,
// equal capacities share a width, thresholds give the hand-worked answer, and inconsistent
// rules or unknown layer names are refused with the parameter named.
#include "dpc_rule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testbed/precision_policy.h"

namespace testbed::dpc {
namespace {

using ::testing::HasSubstr;

ModelGraph Gpt(std::int64_t layers = 4) {
  ModelShape s;
  s.name = "tiny-gpt";
  s.layers = layers;
  s.hidden = 64;
  s.heads = 4;
  s.seq_len = 16;
  s.vocab = 100;
  auto g = BuildModelGraph(s);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(DpcRule, WidthsNeverIncreaseWithCapacityAndTheEdgesStayWide) {
  const ModelGraph g = Gpt();
  for (const char* map : {"log_range", "quantile"}) {
    DpcRule rule;
    rule.map = map;
    auto w = AssignWidths(g, rule);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_EQ(w->size(), g.layers.size());
    // Layer 0 is the embedding (no matrix product): the run's precision.
    EXPECT_EQ((*w)[0].weight_bits, 0);
    EXPECT_EQ((*w)[1].weight_bits, 8);       // first layer with products
    EXPECT_EQ(w->back().weight_bits, 8);     // the head
    for (size_t a = 2; a + 1 < g.layers.size(); ++a) {
      EXPECT_EQ((*w)[a].weight_bits, (*w)[a].activation_bits);
      for (size_t b = 2; b + 1 < g.layers.size(); ++b) {
        if (g.layers[a].params < g.layers[b].params) {
          EXPECT_GE((*w)[a].weight_bits, (*w)[b].weight_bits) << map;
        }
        if (g.layers[a].params == g.layers[b].params) {
          EXPECT_EQ((*w)[a].weight_bits, (*w)[b].weight_bits) << map;
        }
      }
    }
  }
}

TEST(DpcRule, LogRangePutsTheSmallestRankedLayersOnTheWidestRungAndTheLargestOnTheNarrowest) {
  const ModelGraph g = Gpt();
  auto w = AssignWidths(g, DpcRule{});
  ASSERT_TRUE(w.ok());
  // Ranked: attention (4h^2 + 6h params) and MLP (8h^2 + ...) blocks after the first layer.
  for (size_t l = 2; l + 1 < g.layers.size(); ++l) {
    EXPECT_EQ((*w)[l].weight_bits, g.layers[l].kind == LayerKind::kAttention ? 8 : 4) << g.layers[l].name;
  }
}

TEST(DpcRule, ThresholdsGiveTheHandWorkedWidths) {
  const ModelGraph g = Gpt(2);
  DpcRule rule;
  rule.map = "threshold";
  rule.ladder = {6, 3};
  rule.keep_edges = false;
  rule.gradient_bits = 8;
  // Attention 16,768 parameters, MLP 33,216, head 128 (+ tied copy, not its own).
  rule.thresholds = {20000};
  auto w = AssignWidths(g, rule);
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<int> bits;
  for (const LayerPrecision& p : *w) {
    bits.push_back(p.weight_bits);
    EXPECT_EQ(p.gradient_bits, 8);
  }
  // embedding, att0, mlp0, att1, mlp1, head
  EXPECT_EQ(bits, (std::vector<int>{0, 6, 3, 6, 3, 6}));
}

TEST(DpcRule, KeptLayersStayAtTheEdgeWidth) {
  const ModelGraph g = Gpt(2);
  DpcRule rule;
  rule.keep = {"block1.mlp"};
  rule.edge_bits = 16;
  auto w = AssignWidths(g, rule);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)[4].weight_bits, 16);
  EXPECT_EQ((*w)[1].weight_bits, 16);
  EXPECT_EQ((*w)[5].weight_bits, 16);
}

TEST(DpcRule, CapacityPerOutputIsAboutTheFanIn) {
  const ModelGraph g = Gpt(1);
  // MLP: 2hf + f + 3h params, h outputs per token: about 2f = 512.
  const double c = LayerCapacity(g.layers[2], "params_per_output");
  EXPECT_DOUBLE_EQ(c, static_cast<double>(g.layers[2].params) / 64.0);
  EXPECT_DOUBLE_EQ(LayerCapacity(g.layers[2], "params"), static_cast<double>(g.layers[2].params));
}

TEST(DpcRule, InconsistentRulesAreRefusedWithTheParameterNamed) {
  auto message = [](DpcRule r) { return std::string(CheckRule(r).message()); };
  DpcRule r;
  r.ladder = {8, 12};
  EXPECT_THAT(message(r), HasSubstr("dpc: ladder[1] = 12 bits; expected 2 to 8, 16 or 32"));
  r.ladder = {4, 8};
  EXPECT_THAT(message(r), HasSubstr("ladder[1] = 8 is not narrower than ladder[0] = 4"));
  r = DpcRule{};
  r.map = "threshold";
  EXPECT_THAT(message(r), HasSubstr("needs 2 thresholds for a ladder of 3 widths; got 0"));
  r.thresholds = {10, 5};
  EXPECT_THAT(message(r), HasSubstr("thresholds must increase"));
  r = DpcRule{};
  r.thresholds = {1};
  EXPECT_THAT(message(r), HasSubstr("thresholds are used by map = \"threshold\" only"));
  r = DpcRule{};
  r.edge_bits = 1;
  EXPECT_THAT(message(r), HasSubstr("edge_bits = 1"));
  r = DpcRule{};
  r.keep = {"block9.mlp"};
  auto w = AssignWidths(Gpt(2), r);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("dpc: keep: model 'tiny-gpt' has no layer 'block9.mlp' (its layers: embedding, block0.attention"));
}

TEST(BitOps, ForwardBitOpsIsMacsTimesWeightAndActivationBits) {
  ModelShape s;
  s.name = "mlp";
  s.family = "mlp";
  s.layers = 1;
  s.hidden = 32;
  s.inputs = 64;
  s.vocab = 10;
  auto g = BuildModelGraph(s);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->layers.size(), 2u);
  // 64 -> 32 and 32 -> 10: 2,048 and 320 multiply-accumulates per sample.
  EXPECT_DOUBLE_EQ(ForwardMacsPerSample(g->layers[0]), 2048);
  EXPECT_DOUBLE_EQ(ForwardMacsPerSample(g->layers[1]), 320);
  const std::vector<LayerPrecision> bits = {{4, 6, 8}, {0, 0, 0}};
  // 0 counts as the run's precision (fp16: 16 bits).
  EXPECT_DOUBLE_EQ(ForwardBitOps(*g, bits, Precision::kFp16), 2048.0 * 4 * 6 + 320.0 * 16 * 16);
  EXPECT_DOUBLE_EQ(ForwardBitOps(*g, bits, Precision::kFp32), 2048.0 * 4 * 6 + 320.0 * 32 * 32);
}

}  // namespace
}  // namespace testbed::dpc
