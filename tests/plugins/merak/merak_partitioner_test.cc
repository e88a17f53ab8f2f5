// Merak's partitioner: proxy-graph stages are min-max optimal (brute force); the chosen
// recomputation is the smallest stage-aware ratio whose plan the simulator accepts (the next
// smaller one does not fit); the search returns a valid plan that fits.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "brute_force_min_max.h"
#include "merak_partitioner.h"
#include "proxy_graph.h"
#include "ring.h"
#include "scp_scheduler.h"
#include "sim/sim_backend.h"
#include "sim_fixtures.h"
#include "stage_aware_recompute.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::merak {
namespace {

using testbed::testing::ConstantDeviceModel;
using testbed::testing::Gpt;
using testbed::testing::StarCluster;

TEST(ProxyGraphStages, AreMinMaxOptimal) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 5.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 9);
    const int parts = 1 + static_cast<int>(rng() % std::min(n, 5));
    std::vector<double> w(static_cast<size_t>(n));
    for (double& x : w) x = u(rng);
    auto stages = BalancedStages(w, parts);
    ASSERT_TRUE(stages.ok());
    ASSERT_EQ(static_cast<int>(stages->size()), parts);
    double worst = 0;
    int expect_first = 0;
    for (const StageSpec& st : *stages) {
      EXPECT_EQ(st.first_layer, expect_first);
      EXPECT_LT(st.first_layer, st.end_layer);
      expect_first = st.end_layer;
      double sum = 0;
      for (int l = st.first_layer; l < st.end_layer; ++l) sum += w[static_cast<size_t>(l)];
      worst = std::max(worst, sum);
    }
    EXPECT_EQ(expect_first, n);
    EXPECT_NEAR(worst, testing::BruteForceMinMax(w, static_cast<int>(w.size()), parts), 1e-9 * worst);
  }
}

// A run of the simulator behind PlanningContext::evaluate, as the sim backend provides it.
struct SimWorld {
  ModelGraph model = Gpt(8, 1024, 1024);
  Cluster cluster;
  TrainSettings train;
  ParallelSettings parallel;
  ConstantDeviceModel dm{1e-3};
  collectives::Ring ring{collectives::CommTuning{}};
  std::unique_ptr<Scheduler> scheduler;

  explicit SimWorld(double memory_gib) : cluster(StarCluster(8, 5e9, 2e-6, memory_gib)) {
    train.global_batch = 64;
    train.micro_batch = 4;
    ParamSet p;
    for (const ParamSpec& spec : ShiftedCriticalPathScheduler::Params()) p.Set(spec.name(), spec.default_value());
    scheduler = *ShiftedCriticalPathScheduler::Make(p);
  }
  absl::StatusOr<MetricSet> Evaluate(const Plan& plan) {
    SimSettings settings;
    TESTBED_ASSIGN_OR_RETURN(RunOutput out,
                             SimulatePlan(plan, model, cluster, train, dm, ring, *scheduler, settings, false));
    return out.metrics;
  }
  PlanningContext Context() {
    PlanningContext ctx{model, cluster, train, parallel, dm, 1, {}};
    ctx.evaluate = [this](const Plan& plan) { return Evaluate(plan); };
    return ctx;
  }
};

// Memory of stage 0 with no and with full recomputation, from the partitioner's own estimate,
// to pick a device size between the two.
double MidpointGib(SimWorld& w, int pp) {
  auto plan = MakePlan(w.Context(), 1, pp, 1, 1, w.train.micro_batch, RecomputeMode::kNone,
                       [&](int p, int chunks) { return UniformBlockStages(w.model, p * chunks); });
  EXPECT_TRUE(plan.ok());
  const double none = StagePeakBytes(*plan, w.model, w.train, 0, pp);
  ApplyRatios(*plan, std::vector<double>(static_cast<size_t>(pp), 1.0));
  const double full = StagePeakBytes(*plan, w.model, w.train, 0, pp);
  return (none + full) / 2 / 1073741824.0;
}

TEST(MerakPartitioner, ChoosesTheSmallestStageAwareRatioThatFits) {
  const int pp = 4;
  SimWorld probe(80);
  const double gib = MidpointGib(probe, pp);
  SimWorld w(gib);
  w.parallel.pp = pp;
  w.parallel.tp = 1;
  w.parallel.dp = 1;
  MerakOptions o;
  o.search = false;
  o.zero_stage = 0;
  MerakPartitioner merak(o);
  auto plan = merak.Partition(w.Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->Validate(static_cast<int>(w.model.layers.size()), w.cluster).ok());
  // It fits: the simulator (which refuses plans over memory) accepts it.
  EXPECT_TRUE(w.Evaluate(*plan).ok()) << w.Evaluate(*plan).status();
  const Metric* r0 = plan->planner_metrics.Find("merak_r0");
  ASSERT_NE(r0, nullptr);
  ASSERT_GT(r0->value, 0) << "the device was sized so that some recomputation is needed";
  // Its per-stage layers follow the formula for that r0 (with stage P-2 taking P-3's ratio).
  std::vector<double> want = StageAwareRatios(r0->value, pp);
  ShiftAdjust(want);
  for (int s = 0; s < pp; ++s) {
    const StageSpec& st = plan->Chunk(s, 0);
    EXPECT_EQ(st.recompute_layers, RecomputeLayers(want[static_cast<size_t>(s)], st.end_layer - st.first_layer)) << s;
  }
  // One layer of the first stage less and it no longer fits.
  const int n0 = plan->Chunks()[0].end_layer - plan->Chunks()[0].first_layer;
  Plan smaller = *plan;
  std::vector<double> less = StageAwareRatios(r0->value - 1.0 / n0, pp);
  ShiftAdjust(less);
  ApplyRatios(smaller, less);
  EXPECT_EQ(w.Evaluate(smaller).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MerakPartitioner, SearchReturnsAValidPlanThatFits) {
  SimWorld w(24);
  MerakPartitioner merak(MerakOptions{});
  auto plan = merak.Partition(w.Context());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->Validate(static_cast<int>(w.model.layers.size()), w.cluster).ok());
  EXPECT_EQ(plan->num_devices(), w.cluster.num_devices());
  EXPECT_TRUE(w.Evaluate(*plan).ok());
  EXPECT_GE(plan->MicroBatches(0, 0), 4) << "the shifted schedule needs four micro-batches";
  EXPECT_EQ(plan->knobs.tp_chunks, plan->tp(0) > 1 ? 2 : 1);
}

}  // namespace
}  // namespace testbed::merak
