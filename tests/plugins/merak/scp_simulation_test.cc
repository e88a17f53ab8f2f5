// The shifted critical path schedule in the simulator: it expands into a task graph that
// checks and runs without deadlock; with equal stages and no recomputation it is never slower
// than 1F1B; with recomputation it is faster than 1F1B whose recomputation waits for the
// gradient (Megatron-LM and DeepSpeed), because it takes recomputation off the critical path.
#include <gtest/gtest.h>

#include <algorithm>

#include "ring.h"
#include "scp_scheduler.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

namespace testbed::merak {
namespace {

using testbed::testing::ConstantDeviceModel;
using testbed::testing::Gpt;
using testbed::testing::StarCluster;
using testbed::testing::UniformPlan;

constexpr double kLayer = 1e-3;

absl::StatusOr<double> IterationTime(const ModelGraph& model, const Plan& plan, const Cluster& cluster,
                                     const PipelineProgram& program, ExpandOptions expand, bool free_comm = true) {
  TrainSettings train;
  ConstantDeviceModel dm(kLayer);
  collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm};
  auto schedule = ExpandPipeline(ctx, program, expand);
  if (!schedule.ok()) return schedule.status();
  if (auto st = schedule->Check(); !st.ok()) return st;
  SimOptions opt;
  opt.free_communication = free_comm;
  SimInputs in{model, cluster, dm, ring};
  auto r = Simulate(*schedule, in, opt);
  if (!r.ok()) return r.status();
  return r->iteration_time_s;
}

Plan WithFullRecompute(Plan plan) {
  plan.recompute = RecomputeMode::kFull;
  for (Stage& stage : plan.stages) {
    for (StageSpec& st : stage.chunks) st.recompute_layers = st.end_layer - st.first_layer;
  }
  return plan;
}

TEST(ShiftedCriticalPathSchedule, ExpandsChecksAndRunsWithoutDeadlock) {
  for (int pp : {2, 3, 4, 6}) {
    for (int m : {6, 7, 12}) {
      for (auto [tp, dp] : {std::pair{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
        const ModelGraph model = Gpt(2 * pp, 256, 128);
        const Plan plan = WithFullRecompute(UniformPlan(model, tp, pp, dp, 1, m));
        const Cluster cluster = StarCluster(tp * pp * dp, 5e9, 2e-6);
        auto program = ShiftedCriticalPathProgram(pp, m, ScpOptions{});
        ASSERT_TRUE(program.ok());
        ExpandOptions expand;
        expand.recompute_after_gradient = true;
        expand.tp_chunks = tp > 1 ? 2 : 1;
        expand.tp_overlap = tp > 1;
        auto t = IterationTime(model, plan, cluster, *program, expand, false);
        EXPECT_TRUE(t.ok()) << t.status() << " pp=" << pp << " m=" << m << " tp=" << tp << " dp=" << dp;
      }
    }
  }
}

TEST(ShiftedCriticalPathSchedule, NeverSlowerThanOneFOneBWithEqualStagesAndNoRecomputation) {
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m = std::max(4, pp); m <= 16; ++m) {
      const ModelGraph model = Gpt(2 * pp);
      const Plan plan = UniformPlan(model, 1, pp, 1, 1, m);
      const Cluster cluster = StarCluster(pp, 1e10, 1e-6);
      auto scp = ShiftedCriticalPathProgram(pp, m, ScpOptions{});
      ASSERT_TRUE(scp.ok());
      auto t_scp = IterationTime(model, plan, cluster, *scp, ExpandOptions{});
      auto t_1f1b = IterationTime(model, plan, cluster, OneFOneBProgram(pp, m), ExpandOptions{});
      ASSERT_TRUE(t_scp.ok() && t_1f1b.ok());
      EXPECT_LE(*t_scp, *t_1f1b * (1 + 1e-12)) << "pp=" << pp << " m=" << m;
    }
  }
}

TEST(ShiftedCriticalPathSchedule, TakesRecomputationOffTheCriticalPath) {
  // Equal stages that all recompute every layer. Megatron-LM's 1F1B recomputes after each
  // gradient arrives: every backward costs R + B on the critical path. The shifted schedule
  // recomputes the cool-down micro-batches while waiting and not at all on the last stage.
  for (int pp : {2, 4, 8}) {
    for (int m : {8, 16}) {
      const ModelGraph model = Gpt(2 * pp);
      const Plan plan = WithFullRecompute(UniformPlan(model, 1, pp, 1, 1, m));
      const Cluster cluster = StarCluster(pp, 1e10, 1e-6);
      ExpandOptions megatron;
      megatron.recompute_after_gradient = true;
      auto scp = ShiftedCriticalPathProgram(pp, m, ScpOptions{});
      ASSERT_TRUE(scp.ok());
      auto t_scp = IterationTime(model, plan, cluster, *scp, megatron);
      auto t_1f1b = IterationTime(model, plan, cluster, OneFOneBProgram(pp, m), megatron);
      ASSERT_TRUE(t_scp.ok() && t_1f1b.ok());
      EXPECT_LT(*t_scp, *t_1f1b) << "pp=" << pp << " m=" << m;
    }
  }
}

TEST(ShiftedCriticalPathSchedule, SchedulerFollowsThePlansSubPipeliningHint) {
  const ModelGraph model = Gpt(4, 1024, 512);
  Plan plan = UniformPlan(model, 2, 2, 1, 1, 4);
  const Cluster cluster = StarCluster(4, 5e9, 1e-6);
  TrainSettings train;
  ConstantDeviceModel dm(kLayer);
  SchedulingContext ctx{model, cluster, plan, train, dm};
  ShiftedCriticalPathScheduler scheduler(ExpandOptions{}, ScpOptions{}, true);
  auto plain = scheduler.BuildSchedule(ctx);
  plan.knobs.tp_chunks = 2;
  auto chunked = scheduler.BuildSchedule(ctx);
  ASSERT_TRUE(plain.ok() && chunked.ok());
  // Two parts per layer: more compute tasks, the same work.
  EXPECT_GT(chunked->size(), plain->size());
  for (Stage& st : plan.stages) st.replicas.front().micro_batches = 3;
  EXPECT_EQ(scheduler.BuildSchedule(ctx).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testbed::merak
