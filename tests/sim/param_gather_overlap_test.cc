// ZeRO-1 (Megatron-Core's distributed optimizer) over two iterations: gradients are
// reduce-scattered per bucket during the backward, the step updates the shard, and the new
// weights are all-gathered. Closed forms for n measured layers of forward f and backward b on N
// data-parallel devices behind one switch, one bucket per layer, whose ring reduce-scatter and
// all-gather each take r (one layer) and G (the whole stage) with r <= b and r <= f:
//   - one gather of the stage inside the step, which the next iteration waits for (and the
//     last iteration's too): T = 2 (n (f + b) + r) + 2 G;
//   - per bucket, overlapped with the next forward (overlap_param_gather): only the first
//     layer's gather is exposed and the last iteration has none: T = 2 (n (f + b) + r) + r.
#include <gtest/gtest.h>

#include <set>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr double kBw = 400e9, kLinkLat = 936.25e-9;

struct Outcome {
  double time = -1;
  int gathers = 0;
  std::set<int> gather_iterations;
};

Outcome Simulate(const ModelGraph& model, int devices, std::int64_t bucket_bytes, bool overlap, int zero_stage) {
  const Cluster cluster = StarCluster(devices, kBw, kLinkLat);
  GridSpec g;
  g.dp = devices;
  g.micro_batches = 1;
  g.zero_stage = zero_stage;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  const Plan plan = GridPlan(g);
  TrainSettings train;
  const ConstantDeviceModel dm(0);  // measured layers as given, the step's kernel free
  const collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm};
  ctx.iterations = 2;
  ExpandOptions o;
  o.dp_bucket_bytes = bucket_bytes;
  o.param_gather_overlap = overlap;
  auto s = ExpandPipeline(ctx, OneFOneBProgram(1, 1), o);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  Outcome out;
  for (TaskId t = 0; t < static_cast<TaskId>(s->size()); ++t) {
    const Task& task = s->task(t);
    if (task.kind == TaskKind::kCollective && task.op == CollectiveOp::kAllGather) {
      ++out.gathers;
      out.gather_iterations.insert(task.iteration);
    }
  }
  auto r = testbed::Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) out.time = r->iteration_time_s;
  return out;
}

// Ring reduce-scatter or all-gather of a `bytes` buffer over n devices behind one switch:
// (n-1)/n S/B and n-1 steps of the two-link path latency.
double Half(int n, double bytes) { return (n - 1.0) / n * bytes / kBw + (n - 1.0) * 2 * kLinkLat; }

TEST(ParamGatherOverlap, OneGatherPerStepIsExposedWholeEachIteration) {
  const int n = 6, devices = 8;
  const double f = 2e-3, b = 4e-3;
  const std::int64_t params = 64 << 20;  // 128 MiB of fp16 per layer
  const ModelGraph model = MeasuredLayers(n, f, b, params);
  const double r = Half(devices, 2.0 * static_cast<double>(params));
  const double G = Half(devices, 2.0 * n * static_cast<double>(params));
  ASSERT_LT(r, f);
  const Outcome o = Simulate(model, devices, 2 * params, false, 1);
  EXPECT_EQ(o.gathers, 2);  // one per iteration
  EXPECT_NEAR(o.time, 2 * (n * (f + b) + r) + 2 * G, 1e-12);  // both iterations
}

TEST(ParamGatherOverlap, PerBucketGathersHideUnderTheNextForwardButTheFirst) {
  const int n = 6, devices = 8;
  const double f = 2e-3, b = 4e-3;
  const std::int64_t params = 64 << 20;
  const ModelGraph model = MeasuredLayers(n, f, b, params);
  const double r = Half(devices, 2.0 * static_cast<double>(params));
  const Outcome o = Simulate(model, devices, 2 * params, true, 1);
  EXPECT_EQ(o.gathers, n);  // one per bucket, for the second iteration only
  EXPECT_EQ(o.gather_iterations, std::set<int>{1});
  EXPECT_NEAR(o.time, 2 * (n * (f + b) + r) + r, 1e-12);
  // ZeRO-2 gathers alike; ZeRO-0 has nothing to gather.
  EXPECT_NEAR(Simulate(model, devices, 2 * params, true, 2).time, o.time, 1e-15);
  EXPECT_EQ(Simulate(model, devices, 2 * params, true, 0).gathers, 0);
}

TEST(ParamGatherOverlap, GathersLongerThanAForwardPaceIt) {
  // r > f: each layer's forward waits for its gather, which run back to back from the step:
  // the second forward ends n r + f after the first iteration.
  const int n = 4, devices = 16;
  const double f = 0.1e-3, b = 10e-3;
  const std::int64_t params = 64 << 20;
  const ModelGraph model = MeasuredLayers(n, f, b, params);
  const double r = Half(devices, 2.0 * static_cast<double>(params));
  ASSERT_GT(r, f);
  ASSERT_LT(r, b);
  const double first = n * (f + b) + r;
  EXPECT_NEAR(Simulate(model, devices, 2 * params, true, 1).time, first + n * r + f + n * b + r, 1e-12);
}

}  // namespace
}  // namespace testbed::testing
