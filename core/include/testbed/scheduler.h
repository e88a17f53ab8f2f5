// Kind `scheduler`: turns a plan into a schedule. Pipeline schedules (GPipe, 1F1B,
// interleaved 1F1B, Merak's shifted critical path, ...) only decide, per pipeline stage, the
// order of forward / backward / recompute operations: a PipelineProgram. ExpandPipeline
// (testbed/pipeline_program.h) turns that into the full task graph with tensor-parallel
// collectives, stage-to-stage transfers, gradient all-reduce and the optimizer step.
#pragma once

#include "absl/status/statusor.h"
#include "testbed/cluster.h"
#include "testbed/component.h"
#include "testbed/compressor.h"
#include "testbed/device_model.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"
#include "testbed/schedule.h"
#include "testbed/step_inputs.h"

namespace testbed {

// Compression of the data-parallel gradient exchange (the run's `compressor` component).
struct GradientCompression {
  const Compressor* compressor = nullptr;
  bool embedding_only = false;     // compress the embedding's gradient only; all-reduce the rest
  double embedding_density = 1.0;  // share of the embedding gradient's rows that are non-zero
};

struct SchedulingContext {
  const ModelGraph& model;
  const Cluster& cluster;
  const Plan& plan;
  const TrainSettings& train;
  const DeviceModel& device_model;  // for schedulers that weigh stage costs
  // When set, ExpandPipeline replaces the plain all-reduce of compressed layers' gradients by
  // the compressor's encode kernel, transfers and decode kernel.
  const GradientCompression* compression = nullptr;
  // What changes per iteration (routing, expert placement, copies, sampled sizes); null:
  // every iteration alike.
  const StepInputs* inputs = nullptr;
  // Training iterations the schedule covers, in sequence (Task::iteration).
  int iterations = 1;
  // Where batches' tokens come from, for the embedding rows each iteration touches when the
  // expansion needs them and `inputs` has none (sparse embedding communication); null: a
  // Zipf law of exponent 1 with seed 1.
  const TokenModel* tokens = nullptr;
};

class Scheduler : public Component {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kScheduler;

  // Errors: InvalidArgument when the plan does not suit the schedule (e.g. interleaving
  // without virtual stages, too few micro-batches).
  [[nodiscard]] virtual absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) = 0;
};

}  // namespace testbed
