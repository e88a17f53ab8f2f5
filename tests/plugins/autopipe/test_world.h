// Shared inputs of the AutoPipe tests: GPT graphs split into unequal stages, and simulation of
// a program with the full simulator (constant layer times, free communication), where the
// light simulator must agree exactly.
#pragma once

#include <vector>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"
#include "testbed/plan_search.h"

namespace testbed::autopipe {

inline constexpr double kLayer = 1e-3;  // forward of one attention or MLP layer

// A one-chunk plan over `blocks_per_stage` (embedding with the first stage, head with the last).
inline Plan PlanWithBlocks(const ModelGraph& model, const std::vector<int>& blocks_per_stage, int micro_batches) {
  GridSpec g;
  g.pp = static_cast<int>(blocks_per_stage.size());
  g.micro_batches = micro_batches;
  std::vector<int> units = blocks_per_stage;
  units.front() += 1;
  units.back() += 1;
  g.chunks = StagesFromUnitCounts(model, units);
  return GridPlan(g);
}

struct FullSimResult {
  double iteration_s = 0;
  double startup_s = 0;  // the last stage's first forward compute
};

inline FullSimResult SimulateFull(const ModelGraph& model, const Plan& plan, const Cluster& cluster,
                                  const PipelineProgram& program) {
  TrainSettings train;
  testing::ConstantDeviceModel dm(kLayer);
  collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm};
  auto schedule = ExpandPipeline(ctx, program, ExpandOptions{});
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_TRUE(schedule->Check().ok());
  SimOptions opt;
  opt.free_communication = true;
  SimInputs in{model, cluster, dm, ring};
  auto r = Simulate(*schedule, in, opt);
  EXPECT_TRUE(r.ok()) << r.status();
  FullSimResult out;
  out.iteration_s = r->iteration_time_s;
  bool seen = false;
  for (TaskId t = 0; t < static_cast<TaskId>(schedule->size()); ++t) {
    const Task& task = schedule->task(t);
    if (task.kind != TaskKind::kCompute || task.stage != plan.pp() - 1 || task.phase != Phase::kForward) continue;
    const double st = r->task_start_s[static_cast<size_t>(t)];
    out.startup_s = seen ? std::min(out.startup_s, st) : st;
    seen = true;
  }
  return out;
}

}  // namespace testbed::autopipe
