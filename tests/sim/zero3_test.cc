// ZeRO-3 (sharded data parallelism, zero_stage = 3): every layer's weights are all-gathered
// over the data-parallel replicas before each use, on a stream of their own, one layer ahead
// of the compute. Closed forms for n measured layers of forward f and one all-gather of g
// (ring, N devices behind one switch): with g <= f the gathers hide behind the compute but
// the first, so the forward ends at g + n f; with g > f the gathers queue back to back and
// the forward ends at n g + f. The prefetch never runs more than one layer ahead: the third
// gather starts when the first layer's forward ends. And the task graph: two gathers per layer
// and micro-batch (forward and backward), none under zero_stage 2, gathers of an iteration
// after the previous step, shards plus two whole layers in memory.
#include <gtest/gtest.h>

#include <algorithm>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr double kBw = 100e9, kLinkLat = 1e-6;

struct Ran {
  Schedule schedule;
  SimResult result;
};

Ran Simulate(const ModelGraph& model, int devices, int zero_stage, int micro_batches = 1, bool step = false,
             int iterations = 1) {
  const Cluster cluster = StarCluster(devices, kBw, kLinkLat);
  GridSpec g;
  g.dp = devices;
  g.micro_batches = micro_batches;
  g.zero_stage = zero_stage;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  const Plan plan = GridPlan(g);
  TrainSettings train;
  train.optimizer_step = step;
  const ConstantDeviceModel dm(0);  // measured layers are costed as given
  const collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm, nullptr, nullptr, iterations};
  auto s = ExpandPipeline(ctx, OneFOneBProgram(1, micro_batches), ExpandOptions{});
  EXPECT_TRUE(s.ok() && s->Check().ok()) << (s.ok() ? s->Check() : s.status());
  if (!s.ok()) return {};
  auto r = testbed::Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return {std::move(*s), r.ok() ? std::move(*r) : SimResult{}};
}

// Ring all-gather of a gathered output of `bytes` over n devices behind one switch: (n-1)/n of
// it over each link, n-1 steps of the two-link path latency.
double Gather(int n, double bytes) { return (n - 1.0) / n * bytes / kBw + (n - 1.0) * 2 * kLinkLat; }

std::vector<TaskId> Gathers(const Schedule& s, Phase phase) {
  std::vector<TaskId> out;
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    const Task& t = s.task(id);
    if (t.stream == streams::kParamComm && t.phase == phase) out.push_back(id);
  }
  return out;
}

// End of the last forward compute task.
double ForwardEnd(const Ran& r) {
  double end = 0;
  for (TaskId id = 0; id < static_cast<TaskId>(r.schedule.size()); ++id) {
    const Task& t = r.schedule.task(id);
    if (t.kind == TaskKind::kCompute && t.phase == Phase::kForward) end = std::max(end, r.result.task_end_s[id]);
  }
  return end;
}

TEST(ZeroThree, GathersShorterThanAForwardHideButTheFirst) {
  const int n = 5, devices = 4;
  const std::int64_t params = 16 << 20;  // 32 MiB of fp16 weights per layer
  const double g = Gather(devices, 2.0 * params), f = 2 * g, b = 4 * g;
  const ModelGraph model = MeasuredLayers(n, f, b, params);
  const Ran r = Simulate(model, devices, 3);
  EXPECT_NEAR(ForwardEnd(r), g + n * f, 1e-12);
  const std::vector<TaskId> fwd = Gathers(r.schedule, Phase::kForward);
  ASSERT_EQ(fwd.size(), static_cast<size_t>(n));
  EXPECT_NEAR(r.result.task_end_s[fwd[0]] - r.result.task_start_s[fwd[0]], g, 1e-12);
  // One layer ahead at most: the third gather waits for the first layer's forward.
  EXPECT_NEAR(r.result.task_start_s[fwd[1]], g, 1e-12);
  EXPECT_NEAR(r.result.task_start_s[fwd[2]], g + f, 1e-12);
}

TEST(ZeroThree, GathersLongerThanAForwardQueueBackToBack) {
  const int n = 4, devices = 8;
  const std::int64_t params = 16 << 20;
  const double g = Gather(devices, 2.0 * params), f = 0.5 * g;
  const ModelGraph model = MeasuredLayers(n, f, 2 * f, params);
  const Ran r = Simulate(model, devices, 3);
  EXPECT_NEAR(ForwardEnd(r), n * g + f, 1e-12);
}

TEST(ZeroThree, TwoGathersPerLayerAndMicroBatchAndNoneWithoutStageThree) {
  const int n = 3, devices = 2, micro_batches = 2;
  const ModelGraph model = MeasuredLayers(n, 1e-3, 2e-3, 1 << 20);
  const Ran three = Simulate(model, devices, 3, micro_batches);
  EXPECT_EQ(Gathers(three.schedule, Phase::kForward).size(), static_cast<size_t>(n * micro_batches));
  EXPECT_EQ(Gathers(three.schedule, Phase::kBackward).size(), static_cast<size_t>(n * micro_batches));
  for (TaskId id : Gathers(three.schedule, Phase::kForward)) {
    const Task& t = three.schedule.task(id);
    EXPECT_EQ(t.op, CollectiveOp::kAllGather);
    EXPECT_EQ(t.end_layer, t.first_layer + 1);
    EXPECT_EQ(three.schedule.groups()[static_cast<size_t>(t.group)].size(), static_cast<size_t>(devices));
    EXPECT_EQ(t.bytes, 2 << 20);  // the layer's whole fp16 weights, gathered
  }
  // Every compute task covers one layer and waits for that layer's gather of its phase.
  for (TaskId id = 0; id < static_cast<TaskId>(three.schedule.size()); ++id) {
    const Task& t = three.schedule.task(id);
    if (t.kind != TaskKind::kCompute) continue;
    EXPECT_EQ(t.end_layer, t.first_layer + 1);
    bool waits = false;
    for (TaskId d : three.schedule.deps(id)) {
      const Task& g = three.schedule.task(d);
      waits = waits || (g.stream == streams::kParamComm && g.first_layer == t.first_layer && g.phase == t.phase &&
                        g.micro_batch == t.micro_batch);
    }
    EXPECT_TRUE(waits) << three.schedule.Describe(id);
  }
  const Ran two = Simulate(model, devices, 2, micro_batches);
  EXPECT_TRUE(Gathers(two.schedule, Phase::kForward).empty());
  EXPECT_TRUE(Gathers(two.schedule, Phase::kBackward).empty());
}

TEST(ZeroThree, NextIterationGathersWaitForTheStepAndMemoryHoldsShardsAndTwoLayers) {
  const int n = 4, devices = 4;
  const std::int64_t params = 1 << 20;
  const ModelGraph model = MeasuredLayers(n, 1e-3, 2e-3, params);
  const Ran r = Simulate(model, devices, 3, 1, /*step=*/true, /*iterations=*/2);
  for (TaskId id : Gathers(r.schedule, Phase::kForward)) {
    if (r.schedule.task(id).iteration != 1) continue;
    bool after_step = false;
    for (TaskId d : r.schedule.deps(id)) after_step = after_step || r.schedule.task(d).kind == TaskKind::kKernel;
    EXPECT_TRUE(after_step) << r.schedule.Describe(id);
  }
  // Weights, gradients and Adam state of n layers sharded four ways (16 bytes a parameter
  // over 4), plus two whole layers of fp16 weights.
  const Ran zero2 = Simulate(model, devices, 2, 1, true, 2);
  const double shards = 16.0 * n * params / devices, gathered = 2 * 2.0 * params;
  EXPECT_DOUBLE_EQ(r.result.devices[0].static_bytes, shards + gathered);
  EXPECT_GT(zero2.result.devices[0].static_bytes, r.result.devices[0].static_bytes);
}

}  // namespace
}  // namespace testbed::testing
