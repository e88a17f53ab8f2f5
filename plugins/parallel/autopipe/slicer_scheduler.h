// Scheduler component "autopipe.slicer": 1F1B with AutoPipe's micro-batch slicer. The stage
// costs of the plan (device model, per micro-batch fraction) and the stage-to-stage transfer
// times feed the light simulator that picks how many micro-batches to split.
#pragma once

#include "testbed/pipeline_program.h"
#include "testbed/scheduler.h"

namespace testbed::autopipe {

class SlicerScheduler final : public Scheduler {
 public:
  // sliced < 0: chosen automatically; parts: equal pieces per sliced micro-batch.
  SlicerScheduler(ExpandOptions expand, int sliced, int parts) noexcept
      : expand_(expand), sliced_(sliced), parts_(parts) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override;

  // The program BuildSchedule expands (exposed for tests and tools).
  // The program for replicas of `micro_batches` micro-batches.
  [[nodiscard]] absl::StatusOr<PipelineProgram> Program(const SchedulingContext& ctx, int micro_batches) const;

  [[nodiscard]] static std::vector<ParamSpec> Params();
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Scheduler>> Make(const ParamSet& params);

 private:
  ExpandOptions expand_;
  int sliced_;
  int parts_;
};

}  // namespace testbed::autopipe
