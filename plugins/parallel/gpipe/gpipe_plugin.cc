// Plugin "gpipe": the GPipe schedule (Huang et al. 2019): every stage runs the forwards of
// all micro-batches, then all backwards; activations of all micro-batches are held at once.
#include "testbed/pipeline_program.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::gpipe {
namespace {

class GPipe final : public Scheduler {
 public:
  explicit GPipe(ExpandOptions o) : o_(o) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override {
    if (ctx.plan.virtual_stages() != 1) {
      return absl::InvalidArgumentError("gpipe runs one model chunk per stage; the plan has virtual stages");
    }
    const int pp = ctx.plan.pp();
    return ExpandPipeline(
        ctx, ProgramSource([pp](int m) -> absl::StatusOr<PipelineProgram> { return GPipeProgram(pp, m); }), o_);
  }

 private:
  ExpandOptions o_;
};

absl::Status Register(Registry& r) {
  return r.Add<Scheduler>("gpipe", "GPipe: all forwards, then all backwards, flush per iteration",
                          ExpandOptionParams(),
                          [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
                            TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
                            return std::make_unique<GPipe>(o);
                          });
}

}  // namespace
}  // namespace testbed::gpipe

TESTBED_PLUGIN("gpipe", "1.0.0", "GPipe pipeline schedule", testbed::gpipe::Register)
