// Processor sharing (SimOptions::shared_cores), the model of ranks that are threads of one
// machine: n running compute tasks on c cores each progress at min(1, c/n), checked against
// finish times worked out by hand.
#include <gtest/gtest.h>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

namespace testbed::testing {
namespace {

constexpr double kLayer = 1e-3;

// Forward compute tasks of `layers[d]` attention/MLP layers on device d (one each), or, with
// `second`, a second 1-layer task on device 0 after its first.
SimResult SimulateTasks(const std::vector<int>& layers, int cores, bool second = false) {
  const ModelGraph model = Gpt(4);
  const int devices = static_cast<int>(layers.size());
  const Cluster cluster = StarCluster(devices, 1e10, 1e-6);
  Schedule s(devices);
  for (int d = 0; d < devices; ++d) {
    Task t;
    t.kind = TaskKind::kCompute;
    t.device = d;
    t.stage = 0;
    t.micro_batch = 0;
    t.first_layer = 1;  // layer 0 is the embedding (free in this device model)
    t.end_layer = 1 + layers[static_cast<size_t>(d)];
    ComputeWork w;
    w.first_layer = t.first_layer;
    w.end_layer = t.end_layer;
    t.work = s.AddWork(w);
    s.Add(t);
    if (second && d == 0) {
      t.first_layer = 1;
      t.end_layer = 2;
      t.micro_batch = 1;
      w.end_layer = 2;
      t.work = s.AddWork(w);
      s.Add(t);
    }
  }
  EXPECT_TRUE(s.Check().ok()) << s.Check();
  ConstantDeviceModel dm(kLayer);
  collectives::Ring ring(collectives::CommTuning{});
  SimInputs in{model, cluster, dm, ring};
  SimOptions opt;
  opt.shared_cores = cores;
  auto r = Simulate(s, in, opt);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

TEST(ProcessorSharing, WithoutSharingDevicesComputeOnTheirOwn) {
  EXPECT_NEAR(SimulateTasks({1, 1, 2}, 0).iteration_time_s, 2 * kLayer, 1e-15);
}

TEST(ProcessorSharing, EnoughCoresChangeNothing) {
  EXPECT_NEAR(SimulateTasks({1, 1, 2}, 3).iteration_time_s, 2 * kLayer, 1e-15);
  EXPECT_NEAR(SimulateTasks({1, 1, 2}, 8).iteration_time_s, 2 * kLayer, 1e-15);
}

TEST(ProcessorSharing, OneCoreRunsTheTotalWork) {
  // Three tasks at 1/3 speed until the two short ones finish at 3 ms; the long one has 1 ms
  // of work left, alone at full speed: 4 ms.
  const SimResult r = SimulateTasks({1, 1, 2}, 1);
  EXPECT_NEAR(r.task_end_s[0], 3 * kLayer, 1e-12);
  EXPECT_NEAR(r.task_end_s[1], 3 * kLayer, 1e-12);
  EXPECT_NEAR(r.iteration_time_s, 4 * kLayer, 1e-12);
}

TEST(ProcessorSharing, TwoCoresForThreeTasks) {
  // Rate 2/3 until 1.5 ms; then 2 - 1.5 * 2/3 = 1 ms left at full speed: 2.5 ms.
  const SimResult r = SimulateTasks({1, 1, 2}, 2);
  EXPECT_NEAR(r.task_end_s[0], 1.5 * kLayer, 1e-12);
  EXPECT_NEAR(r.iteration_time_s, 2.5 * kLayer, 1e-12);
}

TEST(ProcessorSharing, ATaskStartingLaterSlowsTheOthersFromThen) {
  // One core; device 0 runs two 1-layer tasks in a row, device 1 one 3-layer task. Both run
  // at 1/2 until 2 ms (device 0's first ends); device 0's second starts, still 1/2 until it
  // ends at 4 ms; device 1 has 3 - 2 = 1 ms left at 4 ms, alone: 5 ms = the total work.
  const SimResult r = SimulateTasks({1, 3}, 1, /*second=*/true);
  EXPECT_NEAR(r.task_end_s[0], 2 * kLayer, 1e-12);
  EXPECT_NEAR(r.task_end_s[1], 4 * kLayer, 1e-12);
  EXPECT_NEAR(r.iteration_time_s, 5 * kLayer, 1e-12);
}

}  // namespace
}  // namespace testbed::testing
