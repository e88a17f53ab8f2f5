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
  TwoBW(ExpandOptions o, bool deferred) : o_(o), deferred_(deferred) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override {
    return ExpandPipeDream2BW(ctx, o_, deferred_, "pipedream_2bw");
  }

 private:
  ExpandOptions o_;
  bool deferred_;
};

absl::Status Register(Registry& r) {
  std::vector<ParamSpec> params = ExpandOptionParams();
  params.push_back(ParamSpec::Choice("update", "deferred", {"deferred", "at_last_backward"})
                       .Doc("deferred: a stage applies iteration i's update just before the first forward of "
                            "iteration i + 2 (where the data needs it); at_last_backward: right after its last "
                            "backward of iteration i, waiting for the gradient all-reduce, as PipeDream-2BW's "
                            "runtime does (simulated only: the next iteration's later forwards see the new "
                            "weights)"));
  return r.Add<Scheduler>("pipedream_2bw",
                          "PipeDream-2BW: 1F1B with no flush across train.steps iterations, one-version-late "
                          "updates, two weight versions",
                          params, [](const ParamSet& p) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
                            TESTBED_ASSIGN_OR_RETURN(ExpandOptions o, ExpandOptionsFrom(p));
                            TESTBED_ASSIGN_OR_RETURN(const std::string update, p.Get<std::string>("update"));
                            return std::make_unique<TwoBW>(o, update == "deferred");
                          });
}

}  // namespace
}  // namespace testbed::pipedream

TESTBED_PLUGIN("pipedream", "1.0.0", "PipeDream-2BW asynchronous pipeline schedule", testbed::pipedream::Register)
