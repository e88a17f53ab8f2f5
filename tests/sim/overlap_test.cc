// Gradient buckets overlap the backward pass (data parallelism with TP = 1, measured layer
// times): each bucket's all-reduce starts when its layers' final backward is done. Closed
// forms for n layers of forward f and backward b, one bucket per layer whose ring all-reduce
// takes a: with a <= b every all-reduce but the last hides under the next layer's backward,
// T = n (f + b) + a; with a > b they queue back to back behind the first, T = n f + b + n a.
#include <gtest/gtest.h>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr double kBw = 400e9, kLinkLat = 936.25e-9;

double Simulate(const ModelGraph& model, int devices, std::int64_t bucket_bytes, bool overlap,
                double comm_compute_slowdown = 0) {
  const Cluster cluster = StarCluster(devices, kBw, kLinkLat);
  GridSpec g;
  g.dp = devices;
  g.micro_batches = 1;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  const Plan plan = GridPlan(g);
  TrainSettings train;
  train.optimizer_step = false;
  const ConstantDeviceModel dm(0);  // measured layers are costed as given
  const collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm};
  ExpandOptions o;
  o.dp_bucket_bytes = bucket_bytes;
  o.dp_overlap = overlap;
  auto s = ExpandPipeline(ctx, OneFOneBProgram(1, 1), o);
  EXPECT_TRUE(s.ok()) << s.status();
  SimOptions opt;
  opt.comm_compute_slowdown = comm_compute_slowdown;
  auto r = testbed::Simulate(*s, SimInputs{model, cluster, dm, ring}, opt);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->iteration_time_s : -1;
}

// Ring all-reduce of `bytes` over n devices behind one switch: 2(n-1)/n S/B bandwidth and
// 2(n-1) steps of the two-link path latency.
double Ring(int n, double bytes) { return 2.0 * (n - 1) / n * bytes / kBw + 2.0 * (n - 1) * 2 * kLinkLat; }

TEST(GradientOverlap, AllReducesShorterThanABackwardHideButTheLast) {
  const int n = 6, devices = 8;
  const double f = 2e-3, b = 4e-3;
  const std::int64_t params = 64 << 20;  // 128 MiB of fp16 gradients per layer
  const double a = Ring(devices, 2.0 * static_cast<double>(params));
  ASSERT_LT(a, b);
  const ModelGraph model = MeasuredLayers(n, f, b, params);
  EXPECT_NEAR(Simulate(model, devices, 2 * params, true), n * (f + b) + a, 1e-12);
  // Without overlap every bucket waits for the whole backward: n all-reduces after it.
  EXPECT_NEAR(Simulate(model, devices, 2 * params, false), n * (f + b) + n * a, 1e-12);
}

TEST(GradientOverlap, AllReducesLongerThanABackwardQueueBackToBack) {
  const int n = 5, devices = 16;
  const double f = 0.2e-3, b = 0.4e-3;
  const std::int64_t params = 64 << 20;
  const double a = Ring(devices, 2.0 * static_cast<double>(params));
  ASSERT_GT(a, b);
  const ModelGraph model = MeasuredLayers(n, f, b, params);
  EXPECT_NEAR(Simulate(model, devices, 2 * params, true), n * f + b + n * a, 1e-12);
}

TEST(GradientOverlap, MeasuredLayersAreCostedAsGiven) {
  const ModelGraph model = MeasuredLayers(3, 2.4e-3, 4.8e-3, 10);
  ASSERT_EQ(model.layers.size(), 3u);
  EXPECT_EQ(model.layers[2].name, "block2");
  EXPECT_EQ(model.layers[0].kind, LayerKind::kGiven);
  // No embedding or head: three layers, one device, no communication.
  EXPECT_NEAR(Simulate(model, 1, 1 << 20, true), 3 * 7.2e-3, 1e-12);
  // A sub-batch runs its share of the measured time.
  const ConstantDeviceModel dm(1.0);
  LayerWork w{&model.layers[0], Phase::kBackward, 4, 1, false, Precision::kFp16, 0.5};
  EXPECT_DOUBLE_EQ(*dm.LayerTime(w, DeviceSpec{}), 2.4e-3);
}

}  // namespace
}  // namespace testbed::testing

namespace testbed::testing {
namespace {

// Communication slows the compute it overlaps (SimOptions::comm_compute_slowdown = s): each
// of the n - 1 backwards that runs beside an all-reduce of a <= b spends a at 1 - s of its
// speed, so it takes b + s a; the last all-reduce is exposed as before:
// T = n (f + b) + a + (n - 1) s a. Forwards overlap nothing and keep their time.
TEST(CommComputeContention, OverlappedBackwardsSlowDownByTheSharedTime) {
  const int n = 6, devices = 8;
  const double f = 2e-3, b = 4e-3;
  const std::int64_t params = 64 << 20;
  const double a = Ring(devices, 2.0 * static_cast<double>(params));
  ASSERT_LT(a, b);
  const ModelGraph model = MeasuredLayers(n, f, b, params);
  for (double s : {0.1, 0.25, 0.5}) {
    EXPECT_NEAR(Simulate(model, devices, 2 * params, true, s), n * (f + b) + a + (n - 1) * s * a, 1e-12) << s;
  }
  // Without overlap the all-reduces run after the backward and slow nothing.
  EXPECT_NEAR(Simulate(model, devices, 2 * params, false, 0.25), n * (f + b) + n * a, 1e-12);
}

TEST(CommComputeContention, RefusesASlowdownOutsideItsRange) {
  const Cluster cluster = StarCluster(2, kBw, kLinkLat);
  const ModelGraph model = MeasuredLayers(1, 1e-3, 2e-3, 1 << 20);
  const ConstantDeviceModel dm(0);
  const collectives::Ring ring(collectives::CommTuning{});
  Schedule s(2);
  SimOptions opt;
  opt.comm_compute_slowdown = 1.0;
  auto r = testbed::Simulate(s, SimInputs{model, cluster, dm, ring}, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("comm_compute_slowdown"), std::string::npos) << r.status();
  opt.comm_compute_slowdown = 0.2;
  opt.shared_cores = 2;
  EXPECT_FALSE(testbed::Simulate(s, SimInputs{model, cluster, dm, ring}, opt).ok());
}

}  // namespace
}  // namespace testbed::testing
