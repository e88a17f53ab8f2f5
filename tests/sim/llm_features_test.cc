// Features of current LLMs in the model graph and its kernels, against hand counts:
// grouped-query attention's K/V projection (parameters and FLOPs), SwiGLU's three matrices,
// FlashAttention's activation memory (linear in the sequence length: no s^2 scores) and its
// one fused kernel, rotary positions (no position table), and the Llama 3 presets' sizes.
// Defaults give exactly the former GPT layers.
#include <gtest/gtest.h>

#include <numeric>

#include "testbed/layer_kernels.h"
#include "testbed/model_graph.h"

namespace testbed {
namespace {

ModelShape Shape(std::int64_t s = 4096) {
  ModelShape m;
  m.name = "llm";
  m.family = "gpt";
  m.layers = 2;
  m.hidden = 4096;
  m.heads = 32;
  m.ffn_hidden = 14336;
  m.seq_len = s;
  m.vocab = 128256;
  return m;
}

const Layer& Find(const ModelGraph& g, LayerKind kind) {
  for (const Layer& l : g.layers) {
    if (l.kind == kind) return l;
  }
  return g.layers.front();
}

double Flops(const std::vector<Kernel>& ks) {
  return std::accumulate(ks.begin(), ks.end(), 0.0, [](double a, const Kernel& k) { return a + k.flops; });
}

TEST(LlmFeatures, GroupedQueryAttentionCountsItsKeyValueHeads) {
  ModelShape m = Shape();
  m.kv_heads = 8;
  auto g = BuildModelGraph(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::int64_t h = 4096, s = 4096, kv_h = 4096 / 32 * 8;  // 1024 key/value columns
  const Layer& att = Find(*g, LayerKind::kAttention);
  // Q and O are h x h, K and V h x kv_h; biases of each; LayerNorm 2h.
  EXPECT_EQ(att.params, 2 * h * h + 2 * h * kv_h + 2 * h + 2 * kv_h + 2 * h);
  // Projections 2 s h (h + 2 kv_h + h), scores and weighted values 4 s^2 h.
  EXPECT_DOUBLE_EQ(att.fwd_flops_per_sample, 2.0 * s * h * (2 * h + 2 * kv_h) + 4.0 * s * s * h);
  // The QKV kernel has h + 2 kv_h columns.
  LayerWork w{&att, Phase::kForward, 1, 1, false, Precision::kBf16, 1.0};
  for (const Kernel& k : LayerKernels(w)) {
    if (std::string(k.name) == "qkv") EXPECT_DOUBLE_EQ(k.flops, 2.0 * s * (h + 2 * kv_h) * h);
  }
  // Activations: 9sh + 4 s kv_h + 5as^2 + LayerNorm's share.
  EXPECT_EQ(att.activation_bytes_per_sample, 9 * s * h + 4 * s * kv_h + 5 * 32 * s * s);
  m.kv_heads = 3;
  EXPECT_FALSE(BuildModelGraph(m).ok());  // must divide heads
}

TEST(LlmFeatures, DefaultsAreTheFormerLayersExactly) {
  auto g = BuildModelGraph(Shape(2048));
  ASSERT_TRUE(g.ok());
  const std::int64_t h = 4096, s = 2048, a = 32, f = 14336, v = 128256;
  const Layer& att = Find(*g, LayerKind::kAttention);
  EXPECT_EQ(att.params, 4 * h * h + 4 * h + 2 * h);
  EXPECT_EQ(att.fwd_flops_per_sample, 8.0 * s * h * h + 4.0 * s * s * h);
  EXPECT_EQ(att.activation_bytes_per_sample, 13 * s * h + 5 * a * s * s);
  const Layer& mlp = Find(*g, LayerKind::kMlp);
  EXPECT_EQ(mlp.params, 2 * h * f + f + h + 2 * h);
  EXPECT_EQ(mlp.fwd_flops_per_sample, 4.0 * s * h * f);
  EXPECT_EQ(Find(*g, LayerKind::kEmbedding).params, v * h + s * h);
}

TEST(LlmFeatures, SwiGluHasThreeMatrices) {
  ModelShape m = Shape(2048);
  m.ffn = "swiglu";
  auto g = BuildModelGraph(m);
  ASSERT_TRUE(g.ok());
  const std::int64_t h = 4096, s = 2048, f = 14336;
  const Layer& mlp = Find(*g, LayerKind::kMlp);
  EXPECT_EQ(mlp.params, 3 * h * f + 2 * f + h + 2 * h);
  EXPECT_EQ(mlp.fwd_flops_per_sample, 6.0 * s * h * f);
  EXPECT_EQ(mlp.activation_bytes_per_sample, 5 * s * h + 6 * s * f);
  // Its kernels: gate and up as one GEMM of 2f columns, then down: the layer's FLOPs.
  LayerWork w{&mlp, Phase::kForward, 1, 1, false, Precision::kBf16, 1.0};
  EXPECT_DOUBLE_EQ(Flops(LayerKernels(w)), mlp.fwd_flops_per_sample);
  w.phase = Phase::kBackward;
  EXPECT_DOUBLE_EQ(Flops(LayerKernels(w)), mlp.bwd_flops_per_sample);
  m.ffn = "relu";
  EXPECT_FALSE(BuildModelGraph(m).ok());
}

TEST(LlmFeatures, SwiGluExpertsHaveThreeMatricesEach) {
  ModelShape m = Shape(2048);
  m.family = "moe-gpt";
  m.ffn = "swiglu";
  m.experts = 8;
  m.top_k = 2;
  auto g = BuildModelGraph(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::int64_t h = 4096, s = 2048, f = 14336;
  const Layer& moe = Find(*g, LayerKind::kMoe);
  EXPECT_EQ(moe.expert_params, 3 * h * f + 2 * f + h);
  EXPECT_EQ(moe.params, 8 * moe.expert_params + h * 8 + 2 * h);
  EXPECT_DOUBLE_EQ(moe.fwd_flops_per_sample, 2.0 * s * h * 8 + 2 * 6.0 * s * h * f);
  EXPECT_EQ(moe.activation_bytes_per_sample, 4 * s * h + 2 * (3 * s * h + 6 * s * f));
  // Its kernels (router, then each token's two experts) add up to the layer's FLOPs.
  LayerWork w{&moe, Phase::kForward, 1, 1, false, Precision::kBf16, 1.0};
  EXPECT_DOUBLE_EQ(Flops(LayerKernels(w)), moe.fwd_flops_per_sample);
  w.phase = Phase::kBackward;
  EXPECT_DOUBLE_EQ(Flops(LayerKernels(w)), moe.bwd_flops_per_sample);
  // GeLU experts stay as they were: two matrices.
  m.ffn = "gelu";
  auto gelu = BuildModelGraph(m);
  ASSERT_TRUE(gelu.ok());
  EXPECT_EQ(Find(*gelu, LayerKind::kMoe).expert_params, 2 * h * f + f + h);
  EXPECT_FALSE(Find(*gelu, LayerKind::kMoe).swiglu);
}

TEST(LlmFeatures, CausalFlopsCreditHalfOfTheScores) {
  // 2 causal blocks: each attention's 4 s^2 h forward and 8 s^2 h backward counted half.
  auto g = BuildModelGraph(Shape(2048));
  ASSERT_TRUE(g.ok());
  const double s = 2048, h = 4096;
  EXPECT_DOUBLE_EQ(g->TrainFlopsPerSample() - g->CausalTrainFlopsPerSample(), 2 * 6 * s * s * h);
  ModelShape bert = Shape(512);
  bert.family = "bert";
  bert.vocab = 30522;
  auto b = BuildModelGraph(bert);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->CausalTrainFlopsPerSample(), b->TrainFlopsPerSample());  // nothing masked
}

TEST(LlmFeatures, FlashAttentionMemoryIsLinearInTheSequence) {
  ModelShape m = Shape(4096);
  m.kv_heads = 8;
  m.attention = "flash";
  auto at = [&](std::int64_t s) {
    m.seq_len = s;
    auto g = BuildModelGraph(m);
    EXPECT_TRUE(g.ok());
    return Find(*g, LayerKind::kAttention);
  };
  const Layer a4k = at(4096), a8k = at(8192), a128k = at(131072);
  EXPECT_EQ(a4k.activation_score_bytes_per_sample, 0);
  EXPECT_EQ(a8k.activation_bytes_per_sample, 2 * a4k.activation_bytes_per_sample);
  EXPECT_EQ(a128k.activation_bytes_per_sample, 32 * a4k.activation_bytes_per_sample);
  // 9sh + 4 s kv_h + the log-sum-exp (fp32 per head and token).
  const std::int64_t h = 4096, s = 4096, kv_h = 1024;
  EXPECT_EQ(a4k.activation_bytes_per_sample, 9 * s * h + 4 * s * kv_h + 4 * 32 * s);
  // The model's FLOPs are unchanged; the core is one kernel forward, and 2.5 times its FLOPs
  // backward (the scores recomputed), over half the score matrix (causal: the tiles above
  // the diagonal are skipped).
  const double core = 4.0 * s * s * h / 2;
  LayerWork w{&a4k, Phase::kForward, 1, 1, false, Precision::kBf16, 1.0};
  std::vector<Kernel> fwd = LayerKernels(w);
  w.phase = Phase::kBackward;
  std::vector<Kernel> bwd = LayerKernels(w);
  for (const Kernel& k : fwd) {
    EXPECT_NE(std::string(k.name), "softmax");
    if (std::string(k.name) == "flash_attention") EXPECT_DOUBLE_EQ(k.flops, core);
  }
  for (const Kernel& k : bwd) {
    if (std::string(k.name) == "flash_attention_backward") EXPECT_DOUBLE_EQ(k.flops, 2.5 * core);
  }
  EXPECT_DOUBLE_EQ(Flops(fwd), a4k.fwd_flops_per_sample - core);
  // Under TP 8, each rank runs 1/8 of the heads.
  w.phase = Phase::kForward;
  w.tp = 8;
  for (const Kernel& k : LayerKernels(w)) {
    if (std::string(k.name) == "flash_attention") EXPECT_DOUBLE_EQ(k.flops, core / 8);
  }
}

TEST(LlmFeatures, RotaryPositionsHaveNoTable) {
  ModelShape m = Shape(8192);
  m.positions = "rope";
  auto g = BuildModelGraph(m);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Find(*g, LayerKind::kEmbedding).params, 128256 * 4096);
}

// Llama 3 8B as its preset gives it: 32 layers of 4096 with 8 key/value heads, SwiGLU of
// 14336, untied embeddings of 128,256 rows: about 8.03 B parameters (the paper's figure),
// ours with the biases and LayerNorms of our layers.
TEST(LlmFeatures, Llama3EightBillion) {
  ModelShape m = Shape(8192);
  m.layers = 32;
  m.kv_heads = 8;
  m.ffn = "swiglu";
  m.attention = "flash";
  m.positions = "rope";
  m.tied_embeddings = false;
  auto g = BuildModelGraph(m);
  ASSERT_TRUE(g.ok());
  const double params = static_cast<double>(g->TotalParams());
  EXPECT_NEAR(params / 8.03e9, 1.0, 0.002) << params;
}

}  // namespace
}  // namespace testbed
