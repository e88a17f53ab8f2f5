// Memory: activations per Korthikanti et al. 2022 under TP/SP/recompute, static bytes for
// mixed-precision Adam with ZeRO, FLOPs per iteration against Narayanan et al. 2021, and
// the simulator's memory peak equal to the hand count.
#include <gtest/gtest.h>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/memory_model.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

TEST(Memory, TransformerLayerActivationsFollowKorthikanti) {
  const double s = 2048, h = 4096, a = 32, b = 3;
  ModelShape shape;
  shape.name = "m";
  shape.layers = 1;
  shape.hidden = 4096;
  shape.heads = 32;
  shape.seq_len = 2048;
  shape.vocab = 1000;
  const ModelGraph g = *BuildModelGraph(shape);
  const Layer& attn = g.layers[1];
  const Layer& mlp = g.layers[2];
  for (int t : {1, 2, 8}) {
    // Table 2 of the paper: per layer sbh(10 + 24/t + 5as/(ht)) without SP,
    // sbh(34/t + 5as/(ht)) with SP, and without the 5as/(ht) term under selective recompute.
    const double none = ActivationBytes(attn, b, t, false, false) + ActivationBytes(mlp, b, t, false, false);
    EXPECT_DOUBLE_EQ(none, s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t)));
    const double sp = ActivationBytes(attn, b, t, true, false) + ActivationBytes(mlp, b, t, true, false);
    EXPECT_DOUBLE_EQ(sp, s * b * h * (34.0 / t + 5 * a * s / (h * t)));
    const double sel = ActivationBytes(attn, b, t, true, true) + ActivationBytes(mlp, b, t, true, true);
    EXPECT_DOUBLE_EQ(sel, s * b * h * 34.0 / t);
  }
  EXPECT_DOUBLE_EQ(CheckpointBytes(attn, b, 4, false), 2 * s * b * h);
}

TEST(Memory, StaticBytesOfMixedPrecisionAdamAndZero) {
  const double p = 1e9;
  EXPECT_DOUBLE_EQ(StaticBytes(p, Precision::kFp16, "adam", 0, 8).total(), 16 * p);
  EXPECT_DOUBLE_EQ(StaticBytes(p, Precision::kFp16, "adam", 1, 8).total(), 4 * p + 12 * p / 8);
  EXPECT_DOUBLE_EQ(StaticBytes(p, Precision::kFp16, "adam", 2, 8).total(), 2 * p + 14 * p / 8);
  EXPECT_DOUBLE_EQ(StaticBytes(p, Precision::kFp16, "adam", 3, 8).total(), 16 * p / 8);
}

TEST(Memory, GptFlopsMatchNarayanan) {
  for (auto [L, h, s, V] : {std::tuple{96, 12288, 2048, 51200}, {48, 1600, 1024, 50257}, {24, 1024, 1024, 50257}}) {
    ModelShape shape;
    shape.name = "g";
    shape.layers = L;
    shape.hidden = h;
    shape.heads = h / 64 > 0 ? 16 : 1;
    shape.heads = 16;
    shape.seq_len = s;
    shape.vocab = V;
    const ModelGraph g = *BuildModelGraph(shape);
    const double B = 1;
    // Narayanan et al. 2021, eq. (without recomputation): 72 B s L h^2 (1 + s/6h + V/12Lh).
    const double expected = 72.0 * B * s * L * static_cast<double>(h) * h *
                            (1 + s / (6.0 * h) + static_cast<double>(V) / (12.0 * L * h));
    EXPECT_NEAR(g.TrainFlopsPerSample(), expected, expected * 1e-12);
  }
}

TEST(Memory, SimulatedPeakEqualsStaticPlusHeldActivations) {
  // 1F1B, 2 stages, 4 micro-batches: stage 0 holds 2 micro-batches' activations at its peak,
  // stage 1 one (plus the transient of nothing else: no recomputation).
  const ModelGraph model = Gpt(4, 512, 256);
  const Plan plan = UniformPlan(model, 1, 2, 1, 1, 4, 2);
  const Cluster cluster = StarCluster(2, 1e10, 1e-6);
  TrainSettings train;
  ConstantDeviceModel dm(1e-3);
  collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm};
  auto s = ExpandPipeline(ctx, OneFOneBProgram(2, 4), ExpandOptions{});
  ASSERT_TRUE(s.ok());
  SimInputs in{model, cluster, dm, ring};
  SimOptions opt;
  opt.record_timeline = true;
  opt.free_communication = true;
  auto r = Simulate(*s, in, opt);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int stage = 0; stage < 2; ++stage) {
    double act = 0;
    const StageSpec& st = plan.Chunk(stage, 0);
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      act += ActivationBytes(model.layers[static_cast<size_t>(l)], 2, 1, false, false);
    }
    const double stat = StaticBytes(StageParams(plan, model, stage), Precision::kFp16, "adam", 0, 1).total();
    EXPECT_DOUBLE_EQ(r->devices[static_cast<size_t>(stage)].static_bytes, stat);
    EXPECT_NEAR(r->devices[static_cast<size_t>(stage)].memory_peak_bytes, stat + (2 - stage) * act, 1.0)
        << "stage " << stage;
  }
}

TEST(Memory, FullRecomputationKeepsOnlyCheckpointsBetweenForwardAndBackward) {
  const ModelGraph model = Gpt(4, 512, 256);
  Plan plan = UniformPlan(model, 1, 1, 1, 1, 4, 2);
  plan.recompute = RecomputeMode::kFull;
  for (Stage& stage : plan.stages) {
    for (StageSpec& st : stage.chunks) st.recompute_layers = st.end_layer - st.first_layer;
  }
  const Cluster cluster = StarCluster(1, 1e10, 1e-6);
  TrainSettings train;
  ConstantDeviceModel dm(1e-3);
  collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm};
  auto s = ExpandPipeline(ctx, GPipeProgram(1, 4), ExpandOptions{});
  ASSERT_TRUE(s.ok());
  SimInputs in{model, cluster, dm, ring};
  SimOptions opt;
  opt.free_communication = true;
  auto r = Simulate(*s, in, opt);
  ASSERT_TRUE(r.ok()) << r.status();
  double act = 0, ckpt = 0;
  for (const Layer& l : model.layers) {
    act += ActivationBytes(l, 2, 1, false, false);
    ckpt += CheckpointBytes(l, 2, 1, false);
  }
  const double stat = r->devices[0].static_bytes;
  // GPipe: the peak is the first recompute, which rebuilds one micro-batch's full
  // activations while all four checkpoints (its own included, as its input) are held.
  EXPECT_NEAR(r->devices[0].memory_peak_bytes, stat + 4 * ckpt + act, 1.0);
  // Recomputation adds a forward per micro-batch: 4 x (f + f + 2f) layer-times of 1 ms each.
  EXPECT_NEAR(r->iteration_time_s, 4 * 8 * 4e-3, 1e-9);
}

// The books count a micro-batch's activations under a 32-bit key of (iteration, model chunk,
// micro-batch): a schedule past that is refused with a message naming the task, not run
// with wrapped keys.
TEST(Memory, MicroBatchKeysPast32BitsAreRefused) {
  const ModelGraph model = Gpt(1);
  const Cluster cluster = StarCluster(1, 1e10, 1e-6);
  ConstantDeviceModel dm(1e-3);
  collectives::Ring ring(collectives::CommTuning{});
  Schedule s(1);
  ComputeWork w;
  w.first_layer = 1;
  w.end_layer = 2;
  Task t;
  t.device = 0;
  t.first_layer = 1;
  t.end_layer = 2;
  t.work = s.AddWork(w);
  t.chunk = 3;
  t.micro_batch = 7;
  t.iteration = 0;
  s.Add(t);
  t.iteration = 1'000'000'000;  // (1e9 x 4 + 3) x 8 + 7 > 2^32
  const TaskId far = s.Add(t);
  auto r = Simulate(s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("too large to simulate"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find(s.Describe(far)), std::string::npos) << r.status();
}

}  // namespace
}  // namespace testbed::testing
