// Plugin "pipedream": PipeDream-2BW (Narayanan et al. 2021, "Memory-Efficient Pipeline-Parallel
// DNN Training"): 1F1B across iteration boundaries with no flush, gradients of an iteration's
// micro-batches coalesced into one update applied to the weights one version later, two weight
// versions stashed per stage.
#include "testbed/pipeline_program.h"
#include "testbed/plugin.h"
#include "testbed/status_macros.h"

namespace testbed::pipedream {
namespace {

class TwoBW final : public Scheduler {
 public:
  explicit TwoBW(ExpandOptions o) : o_(o) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override {
    if (ctx.plan.virtual_stages() != 1) {
      return absl::InvalidArgumentError("pipedream_2bw runs one model chunk per stage; the plan has virtual stages");
    }
    const int pp = ctx.plan.pp(), iterations = ctx.iterations;
    return ExpandPipeline(ctx,
                          ProgramSource([pp, iterations](int m) -> absl::StatusOr<PipelineProgram> {
                            return PipeDream2BWProgram(pp, m, iterations);
                          }),
                          o_);
  }

 private:
  ExpandOptions o_;
};

absl::Status Register(Registry& r) {
  return r.Add<Scheduler>("pipedream_2bw",
                          "PipeDream-2BW: 1F1B with no flush across train.steps iterations, one-version-late "
                          "updates, two weight versions",
                          ExpandOptionParams(), [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
                            TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
                            return std::make_unique<TwoBW>(o);
                          });
}

}  // namespace
}  // namespace testbed::pipedream

TESTBED_PLUGIN("pipedream", "1.0.0", "PipeDream-2BW asynchronous pipeline schedule", testbed::pipedream::Register)
