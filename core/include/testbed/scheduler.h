// Kind `scheduler`: turns a plan into a schedule. Pipeline schedules (GPipe, 1F1B,
// interleaved 1F1B, Merak's shifted critical path, ...) only decide, per pipeline stage, the
// order of forward / backward / recompute operations: a PipelineProgram. ExpandPipeline
// (testbed/pipeline_program.h) turns that into the full task graph with tensor-parallel
// collectives, stage-to-stage transfers, gradient all-reduce and the optimizer step.
#pragma once

#include "absl/status/statusor.h"
#include "testbed/cluster.h"
#include "testbed/component.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"
#include "testbed/schedule.h"

namespace testbed {

struct SchedulingContext {
  const ModelGraph& model;
  const Cluster& cluster;
  const Plan& plan;
  const TrainSettings& train;
  const DeviceModel& device_model;  // for schedulers that weigh stage costs
};

class Scheduler : public Component {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kScheduler;

  // Errors: InvalidArgument when the plan does not suit the schedule (e.g. interleaving
  // without virtual stages, too few micro-batches).
  [[nodiscard]] virtual absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) = 0;
};

}  // namespace testbed
