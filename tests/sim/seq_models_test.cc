// The NLP models of the sparse-embedding papers in the model graph (families lstm, gnmt,
// transformer) against hand counts: parameters of each preset's shape (and the Transformer
// paper's published sizes), an LSTM layer's FLOPs and its kernels (forward, backward, and a
// backward split into input and weight gradients), GNMT's bidirectional first layer and
// attention block, the decoder's cross-attention, blocks for planners, and refusals.
#include <gtest/gtest.h>

#include <numeric>

#include "ring.h"
#include "roofline_model.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/layer_kernels.h"
#include "testbed/model_graph.h"
#include "testbed/pipeline_program.h"
#include "testbed/plan_search.h"

namespace testbed {
namespace {

std::int64_t Lstm(std::int64_t in, std::int64_t h, std::int64_t dirs = 1) { return dirs * (4 * h * (in + h) + 8 * h); }

ModelShape Seq(const std::string& family, std::int64_t enc, std::int64_t dec, std::int64_t h, std::int64_t s,
               std::int64_t v) {
  ModelShape m;
  m.name = family;
  m.family = family;
  m.layers = enc;
  m.decoder_layers = dec;
  m.hidden = h;
  m.seq_len = s;
  m.vocab = v;
  m.tied_embeddings = false;
  return m;
}

double Flops(const std::vector<Kernel>& ks) {
  return std::accumulate(ks.begin(), ks.end(), 0.0, [](double a, const Kernel& k) { return a + k.flops; });
}

TEST(SeqModels, LstmLanguageModelCountsByHand) {
  auto g = BuildModelGraph(Seq("lstm", 3, 0, 650, 35, 33278));
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->layers.size(), 5u);
  EXPECT_EQ(g->layers[0].kind, LayerKind::kEmbedding);
  EXPECT_EQ(g->layers[0].params, 33278 * 650);
  for (int i = 1; i <= 3; ++i) {
    const Layer& l = g->layers[static_cast<size_t>(i)];
    EXPECT_EQ(l.kind, LayerKind::kLstm);
    EXPECT_EQ(l.params, Lstm(650, 650));
    EXPECT_DOUBLE_EQ(l.fwd_flops_per_sample, 2.0 * 35 * 4 * 650 * (650 + 650));
    EXPECT_DOUBLE_EQ(l.bwd_flops_per_sample, 2 * l.fwd_flops_per_sample);
    EXPECT_EQ(l.block, i - 1);
  }
  EXPECT_EQ(g->layers[4].params, 33278 * 650 + 33278);  // untied softmax and its bias
  EXPECT_EQ(g->TotalParams(), 53450278);
  EXPECT_EQ(g->NumBlocks(), 3);
}

TEST(SeqModels, LstmKernelsCarryTheLayersFlopsStepByStep) {
  auto g = BuildModelGraph(Seq("lstm", 1, 0, 64, 10, 100));
  ASSERT_TRUE(g.ok());
  const Layer& l = g->layers[1];
  LayerWork fwd{&l, Phase::kForward, 4, 1, false, Precision::kFp16, 1.0};
  const auto f = LayerKernels(fwd);
  // The input GEMM, then per step the recurrent GEMM and the gates.
  ASSERT_EQ(f.size(), 1u + 2 * 10);
  EXPECT_DOUBLE_EQ(Flops(f), 4 * l.fwd_flops_per_sample);
  LayerWork bwd = fwd;
  bwd.phase = Phase::kBackward;
  EXPECT_DOUBLE_EQ(Flops(LayerKernels(bwd)), 4 * l.bwd_flops_per_sample);
  // Split: the input gradients and the weights' gradients, half the FLOPs each.
  LayerWork data = bwd, weights = bwd;
  data.part = LayerPart::kBackwardData;
  weights.part = LayerPart::kBackwardWeights;
  EXPECT_DOUBLE_EQ(Flops(LayerKernels(data)), 4 * l.fwd_flops_per_sample);
  EXPECT_DOUBLE_EQ(Flops(LayerKernels(weights)), 4 * l.fwd_flops_per_sample);
  for (const Kernel& k : LayerKernels(weights)) EXPECT_TRUE(k.weight_gradient) << k.name;
  // Memory-bound kernels go with the input gradients.
  EXPECT_EQ(LayerKernels(data).size() + LayerKernels(weights).size(), LayerKernels(bwd).size());
}

TEST(SeqModels, GnmtHasABidirectionalFirstLayerAndAttentionInTheDecoder) {
  const std::int64_t h = 1024, s = 50, v = 32320;
  auto g = BuildModelGraph(Seq("gnmt", 4, 4, h, s, v));
  ASSERT_TRUE(g.ok()) << g.status();
  // embedding, 4 encoder layers, decoder0, its attention, 3 decoder layers, head.
  ASSERT_EQ(g->layers.size(), 11u);
  const Layer& emb = g->layers[0];
  EXPECT_EQ(emb.embedding_streams, 2);  // source and target tokens in one table
  EXPECT_EQ(emb.params, v * h);
  const Layer& enc0 = g->layers[1];
  EXPECT_EQ(enc0.lstm_directions, 2);
  EXPECT_EQ(enc0.params, Lstm(h, h, 2));
  EXPECT_EQ(enc0.output_bytes_per_sample, 2 * s * 2 * h + 2 * s * h);  // both directions, target embeddings
  EXPECT_EQ(g->layers[2].ffn_hidden, 2 * h);                         // reads both directions
  EXPECT_EQ(g->layers[2].params, Lstm(2 * h, h));
  const Layer& att = g->layers[6];
  EXPECT_EQ(att.kind, LayerKind::kAttention);
  EXPECT_TRUE(att.cross_attention);
  EXPECT_FALSE(att.causal);
  EXPECT_EQ(att.block, g->layers[5].block);  // in the first decoder layer's block
  EXPECT_EQ(g->layers[7].ffn_hidden, 2 * h);  // input and attention context
  EXPECT_EQ(g->TotalParams(), 162772544);
  EXPECT_EQ(g->NumBlocks(), 8);
  auto g16 = BuildModelGraph(Seq("gnmt", 8, 8, h, s, v));
  ASSERT_TRUE(g16.ok());
  EXPECT_EQ(g16->TotalParams(), 246724160);
}

TEST(SeqModels, TransformersHaveThePapersSizes) {
  // Vaswani et al. 2017, Table 3: base 65 M, big 213 M parameters (shared vocabulary of 37,000).
  for (const auto& [h, f, a, published] : {std::tuple{512, 2048, 8, 65e6}, std::tuple{1024, 4096, 16, 213e6}}) {
    ModelShape m = Seq("transformer", 6, 6, h, 128, 37000);
    m.ffn_hidden = f;
    m.heads = a;
    m.tied_embeddings = true;
    auto g = BuildModelGraph(m);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_NEAR(static_cast<double>(g->TotalParams()), published, 0.035 * published) << h;
    EXPECT_EQ(g->NumBlocks(), 12);
    // A decoder block: causal self-attention, cross-attention (not causal), MLP.
    int decoder_layers = 0, cross = 0;
    for (const Layer& l : g->layers) {
      if (l.block >= 6) ++decoder_layers;
      if (l.cross_attention) {
        ++cross;
        EXPECT_FALSE(l.causal);
      }
    }
    EXPECT_EQ(decoder_layers, 18);
    EXPECT_EQ(cross, 6);
    EXPECT_EQ(g->layers.back().shared_params, 37000 * h);  // the softmax shares the table
  }
}

TEST(SeqModels, ShapesThatDoNotSuitTheirFamilyAreRefused) {
  ModelShape lstm = Seq("lstm", 2, 1, 64, 8, 100);
  EXPECT_NE(BuildModelGraph(lstm).status().message().find("decoder_layers"), std::string::npos);
  ModelShape gnmt = Seq("gnmt", 1, 2, 64, 8, 100);
  EXPECT_NE(BuildModelGraph(gnmt).status().message().find(">= 2"), std::string::npos);
  ModelShape tr = Seq("transformer", 2, 0, 64, 8, 100);
  tr.heads = 4;
  EXPECT_NE(BuildModelGraph(tr).status().message().find("decoder_layers must be >= 1"), std::string::npos);
  ModelShape gpt = Seq("gpt", 2, 2, 64, 8, 100);
  gpt.heads = 4;
  EXPECT_NE(BuildModelGraph(gpt).status().message().find("decoder_layers"), std::string::npos);
}

TEST(SeqModels, GnmtSimulatesOnAPipeline) {
  auto g = BuildModelGraph(Seq("gnmt", 4, 4, 256, 20, 1000));
  ASSERT_TRUE(g.ok());
  const Cluster cluster = testing::StarCluster(2, 10e9, 1e-6);
  GridSpec spec;
  spec.pp = 2;
  spec.micro_batch = 4;
  spec.micro_batches = 4;
  auto stages = UniformBlockStages(*g, 2);
  ASSERT_TRUE(stages.ok()) << stages.status();
  spec.chunks = *stages;
  const Plan plan = GridPlan(spec);
  TrainSettings train;
  const roofline::RooflineModel dm(roofline::RooflineParams{});
  const collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{*g, cluster, plan, train, dm};
  auto s = ExpandPipeline(ctx, OneFOneBProgram(2, 4), ExpandOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = Simulate(*s, SimInputs{*g, cluster, dm, ring}, SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->iteration_time_s, 0);
}

}  // namespace
}  // namespace testbed
