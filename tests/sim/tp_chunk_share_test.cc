// Tensor-parallel layers in chunks costed as shares of the whole layer (Transformer Engine's
// userbuffers chunk only the GEMMs next to each collective): the k chunks of a layer take, in
// sum, exactly the unchunked layer's time and hold its activations, where chunks costed as the
// layer on 1/k of the samples pay every kernel's fixed cost k times. With chunks joined (the
// next layer waits for every chunk's collective), a layer of compute c and all-reduce a <= c
// takes c + a / k: each chunk's collective hides under the next chunk's compute but the last.
#include <gtest/gtest.h>

#include <map>

#include "ring.h"
#include "roofline_model.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

struct Outcome {
  Schedule schedule;
  std::vector<double> start, end;
};

Outcome Simulated(const ModelGraph& model, const DeviceModel& dm, int chunks, bool share) {
  const int tp = 4;
  const Cluster cluster = Hoppers(tp);
  GridSpec g;
  g.tp = tp;
  g.micro_batches = 1;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  const Plan plan = GridPlan(g);
  TrainSettings train;
  train.precision = Precision::kBf16;
  train.optimizer_step = false;
  SchedulingContext ctx{model, cluster, plan, train, dm};
  ExpandOptions o;
  o.tp_chunks = chunks;
  o.tp_overlap = true;
  o.tp_chunk_join = true;
  o.tp_chunk_time_share = share;
  auto s = ExpandPipeline(ctx, OneFOneBProgram(1, 1), o);
  EXPECT_TRUE(s.ok()) << s.status();
  const collectives::Ring ring(collectives::CommTuning{});
  auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return {*std::move(s), r->task_start_s, r->task_end_s};
}

// Per (layer, phase): the summed duration and activation bytes of its compute tasks.
std::map<std::pair<int, int>, std::pair<double, double>> PerLayer(const Outcome& o) {
  std::map<std::pair<int, int>, std::pair<double, double>> out;
  for (TaskId id = 0; id < static_cast<TaskId>(o.schedule.size()); ++id) {
    const Task& t = o.schedule.task(id);
    if (t.kind != TaskKind::kCompute) continue;
    auto& [time, bytes] = out[{t.first_layer, static_cast<int>(t.phase)}];
    time += o.end[static_cast<size_t>(id)] - o.start[static_cast<size_t>(id)];
    bytes += o.schedule.compute(id).activation_bytes;
  }
  return out;
}

TEST(TpChunkTimeShare, ChunksSumToTheWholeLayerWhereSmallerBatchesCostMore) {
  const ModelGraph model = LlamaLike(2, 32000);
  const roofline::RooflineModel dm(roofline::RooflineParams{});
  const auto whole = PerLayer(Simulated(model, dm, 1, false));
  const auto shared = PerLayer(Simulated(model, dm, 4, true));
  const auto smaller = PerLayer(Simulated(model, dm, 4, false));
  int tp_layers = 0;
  bool any_costlier = false;
  for (const auto& [key, w] : whole) {
    const Layer& layer = model.layers[static_cast<size_t>(key.first)];
    if (layer.kind != LayerKind::kAttention && layer.kind != LayerKind::kMlp) continue;
    ++tp_layers;
    EXPECT_NEAR(shared.at(key).first, w.first, 1e-12 * w.first) << layer.name;
    EXPECT_NEAR(shared.at(key).second, w.second, 1e-9 * w.second + 1e-9) << layer.name;
    EXPECT_GE(smaller.at(key).first, w.first * (1 - 1e-12)) << layer.name;
    any_costlier = any_costlier || smaller.at(key).first > w.first * 1.001;
  }
  EXPECT_EQ(tp_layers, 2 * 2 * 2);  // 2 blocks x (attention, MLP) x (forward, backward)
  EXPECT_TRUE(any_costlier);
}

TEST(TpChunkTimeShare, JoinedChunksExposeOneChunksCollective) {
  // Constant layer times: c = 4 ms forward per TP layer. The next layer starts when the last
  // chunk's all-reduce ends: c + a / k after the layer started, a being the layer's all-reduce.
  const ModelGraph model = LlamaLike(1, 32000);
  const ConstantDeviceModel dm(4e-3);
  const int k = 4;
  const Outcome o = Simulated(model, dm, k, true);
  std::vector<TaskId> fwd;  // the attention layer's forward chunks and collectives, in order
  double a = 0;
  TaskId first_chunk = -1, mlp_start = -1;
  for (TaskId id = 0; id < static_cast<TaskId>(o.schedule.size()); ++id) {
    const Task& t = o.schedule.task(id);
    if (t.phase != Phase::kForward) continue;
    const LayerKind kind = model.layers[static_cast<size_t>(t.first_layer)].kind;
    if (kind == LayerKind::kAttention && t.kind == TaskKind::kCompute && first_chunk < 0) first_chunk = id;
    if (kind == LayerKind::kAttention && t.kind == TaskKind::kCollective) {
      a += o.end[static_cast<size_t>(id)] - o.start[static_cast<size_t>(id)];
    }
    if (kind == LayerKind::kMlp && t.kind == TaskKind::kCompute && mlp_start < 0) mlp_start = id;
  }
  ASSERT_GE(first_chunk, 0);
  ASSERT_GE(mlp_start, 0);
  ASSERT_GT(a, 0);
  ASSERT_LT(a, 4e-3);
  EXPECT_NEAR(o.start[static_cast<size_t>(mlp_start)] - o.start[static_cast<size_t>(first_chunk)], 4e-3 + a / k, 1e-12);
}

}  // namespace
}  // namespace testbed::testing
