// FP8 training (Transformer Engine's recipe) against hand counts: which kernels run in FP8 and
// what they move, a linear layer's GEMM time at the device model's FP8 peak and efficiency,
// BF16 storage with the FP8 weight copies and the scaling state in static memory, and a
// simulated iteration that is faster than BF16 but by less than the 2x of the peaks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "ring.h"
#include "roofline_model.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/layer_kernels.h"
#include "testbed/memory_model.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

ModelGraph Llama(int blocks) { return LlamaLike(blocks, 128256); }

const Layer& Find(const ModelGraph& g, LayerKind kind) {
  return *std::find_if(g.layers.begin(), g.layers.end(), [&](const Layer& l) { return l.kind == kind; });
}

std::vector<Kernel> Named(const std::vector<Kernel>& ks, const std::string& name) {
  std::vector<Kernel> out;
  for (const Kernel& k : ks) {
    if (name == k.name) out.push_back(k);
  }
  return out;
}

TEST(Fp8, LinearLayersTakeFp8OperandsAndEverythingElseStaysBf16) {
  const ModelGraph g = Llama(1);
  const Layer& mlp = Find(g, LayerKind::kMlp);
  const double tokens = 2 * 4096.0, h = 4096, f = 14336;
  LayerWork w{&mlp, Phase::kForward, 2, 1, false, Precision::kFp8, 1.0};
  const std::vector<Kernel> fwd = LayerKernels(w);
  // fc1 (gate and up, 2f columns): A = tokens x h, B = h x 2f in FP8, C = tokens x 2f in BF16.
  const auto fc1 = Named(fwd, "fc1_gate_up");
  ASSERT_EQ(fc1.size(), 1U);
  EXPECT_EQ(fc1[0].precision, Precision::kFp8);
  EXPECT_DOUBLE_EQ(fc1[0].flops, 2 * tokens * 2 * f * h);
  EXPECT_DOUBLE_EQ(fc1[0].bytes, tokens * h + h * 2 * f + 2 * tokens * 2 * f);
  // One cast (read BF16, write FP8 and its transpose) per linear input: fc1's and fc2's.
  const auto casts = Named(fwd, "fp8_cast_transpose");
  ASSERT_EQ(casts.size(), 2U);
  EXPECT_DOUBLE_EQ(casts[0].bytes, 4 * tokens * h);
  EXPECT_DOUBLE_EQ(casts[1].bytes, 4 * tokens * f);
  for (const Kernel& k : fwd) {
    if (k.kind == KernelKind::kMemory) EXPECT_EQ(k.precision, Precision::kBf16) << k.name;
  }
  // The same FLOPs as the BF16 layer; the memory-bound kernels move what they move in BF16.
  LayerWork b = w;
  b.precision = Precision::kBf16;
  const std::vector<Kernel> bf = LayerKernels(b);
  double flops8 = 0, flops16 = 0;
  for (const Kernel& k : fwd) flops8 += k.flops;
  for (const Kernel& k : bf) flops16 += k.flops;
  EXPECT_DOUBLE_EQ(flops8, flops16);
  EXPECT_DOUBLE_EQ(Named(fwd, "swiglu")[0].bytes, Named(bf, "swiglu")[0].bytes);
  // Backward: the output gradient's cast, then dgrad (reads dC, B; writes dA) and wgrad
  // (reads A^T, dC; writes dB).
  w.phase = Phase::kBackward;
  const auto fc2 = Named(LayerKernels(w), "fc2");
  ASSERT_EQ(fc2.size(), 2U);
  EXPECT_DOUBLE_EQ(fc2[0].bytes, tokens * h + f * h + 2 * tokens * f);
  EXPECT_DOUBLE_EQ(fc2[1].bytes, tokens * f + tokens * h + 2 * f * h);
  // The attention core and the output logits are not linear layers of the block: BF16.
  const Layer& att = Find(g, LayerKind::kAttention);
  w = LayerWork{&att, Phase::kForward, 1, 1, false, Precision::kFp8, 1.0};
  const auto fa = Named(LayerKernels(w), "flash_attention");
  ASSERT_EQ(fa.size(), 1U);
  EXPECT_EQ(fa[0].precision, Precision::kBf16);
  EXPECT_EQ(Named(LayerKernels(w), "qkv")[0].precision, Precision::kFp8);
  w.layer = &Find(g, LayerKind::kHead);
  EXPECT_EQ(Named(LayerKernels(w), "logits")[0].precision, Precision::kBf16);
}

TEST(Fp8, ALinearGemmTakesItsFlopsOverTheFp8PeakAtTheModelsEfficiency) {
  const roofline::RooflineParams p;  // the preset's defaults
  const roofline::RooflineModel dm(p);
  const DeviceSpec dev = Hopper();
  const ModelGraph g = Llama(1);
  LayerWork w{&Find(g, LayerKind::kMlp), Phase::kForward, 1, 1, false, Precision::kFp8, 1.0};
  const Kernel fc1 = Named(LayerKernels(w), "fc1_gate_up")[0];
  // Roofline: max(FLOPs / (peak x eta x F / (F + F_half)), bytes / (bandwidth x eta_mem)) + launch.
  const double eff = p.gemm_efficiency * fc1.flops / (fc1.flops + p.gemm_half_gflops * 1e9);
  const double compute = fc1.flops / (1978.9e12 * eff);
  ASSERT_GT(compute, fc1.bytes / (dev.memory_bandwidth_bytes_per_s * p.memory_efficiency));  // compute-bound
  auto t = dm.Time(fc1, dev);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(*t, compute + p.launch_overhead_s);
  // The same GEMM in BF16 takes its FLOPs over the BF16 peak.
  Kernel bf = fc1;
  bf.precision = Precision::kBf16;
  const double eff16 = p.gemm_efficiency * bf.flops / (bf.flops + p.gemm_half_gflops * 1e9);
  EXPECT_DOUBLE_EQ(*dm.Time(bf, dev), std::max(bf.flops / (989.4e12 * eff16),
                                               bf.bytes / (dev.memory_bandwidth_bytes_per_s * p.memory_efficiency)) +
                                          p.launch_overhead_s);
  // A device without FP8 units cannot run it, and says so.
  DeviceSpec ampere = dev;
  ampere.peak_flops.erase(Precision::kFp8);
  auto refused = dm.Time(fc1, ampere);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fp8"), std::string::npos) << refused.status();
}

TEST(Fp8, StaticMemoryKeepsBf16WeightsAndGradientsAndTheFp8Copies) {
  // Mixed-precision Adam at BF16: 2 + 2 + 12 bytes per parameter; FP8 adds its copy and the
  // copy's transpose, 2 bytes.
  const StaticMemory bf = StaticBytes(1e9, Precision::kBf16, "adam", 0, 1);
  const StaticMemory f8 = StaticBytes(1e9, Precision::kFp8, "adam", 0, 1);
  EXPECT_DOUBLE_EQ(bf.total(), 16e9);
  EXPECT_DOUBLE_EQ(f8.weights, 2e9);
  EXPECT_DOUBLE_EQ(f8.gradients, 2e9);
  EXPECT_DOUBLE_EQ(f8.fp8_weights, 2e9);
  EXPECT_DOUBLE_EQ(f8.total(), 18e9);
  // ZeRO-3 over 4 shards everything, the FP8 copies with the weights.
  EXPECT_DOUBLE_EQ(StaticBytes(1e9, Precision::kFp8, "adam", 3, 4).total(), 18e9 / 4);
  // Scaling state: 2 linear layers x 3 tensors x (history + scale + inverse) x 4 bytes.
  const ModelGraph g = Llama(1);
  EXPECT_DOUBLE_EQ(Fp8ScalingBytes(Find(g, LayerKind::kAttention), 1024), 2 * 3 * 1026 * 4.0);
  EXPECT_DOUBLE_EQ(Fp8ScalingBytes(Find(g, LayerKind::kHead), 1024), 0.0);
}

struct Iteration {
  double time_s = 0;
  double static_bytes = 0;
};

Iteration Simulate(const ModelGraph& model, Precision precision) {
  const Cluster cluster = Hoppers(1);
  const roofline::RooflineModel dm(roofline::RooflineParams{});
  GridSpec grid;
  grid.micro_batch = 1;
  grid.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  const Plan plan = GridPlan(grid);
  TrainSettings train;
  train.precision = precision;
  SchedulingContext ctx{model, cluster, plan, train, dm};
  auto s = ExpandPipeline(ctx, OneFOneBProgram(1, 2), ExpandOptions{});
  EXPECT_TRUE(s.ok()) << s.status();
  const collectives::Ring ring(collectives::CommTuning{});
  auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return {r->iteration_time_s, s->static_bytes(0)};
}

TEST(Fp8, AnIterationIsFasterThanBf16ByLessThanThePeaksRatio) {
  const ModelGraph model = Llama(2);
  const Iteration bf = Simulate(model, Precision::kBf16);
  const Iteration f8 = Simulate(model, Precision::kFp8);
  EXPECT_LT(f8.time_s, bf.time_s);
  // Attention core, logits, memory-bound kernels and the casts keep it above half.
  EXPECT_GT(f8.time_s, bf.time_s / 2);
  // Static memory: the FP8 copies (2 bytes a parameter) and the scaling state of 2 blocks x
  // 2 FP8 layers each.
  double scaling = 0;
  for (const Layer& l : model.layers) scaling += Fp8ScalingBytes(l, 1024);
  EXPECT_DOUBLE_EQ(scaling, 2 * 2 * 2 * 3 * 1026 * 4.0);
  EXPECT_DOUBLE_EQ(f8.static_bytes - bf.static_bytes, 2.0 * static_cast<double>(model.TotalParams()) + scaling);
}

}  // namespace
}  // namespace testbed::testing
