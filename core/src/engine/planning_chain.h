// The planning chain: the component kinds that make and refine a run's plan, in the order
// every backend runs them. The partitioner makes the plan; each later kind present in the run
// refines it (testbed/plan_refiner.h). A backend lists the chain's kinds among those it takes
// (AddPlanningKinds) and calls RunPlanningChain; adding a kind to the chain needs no change
// to any backend.
#pragma once

#include <span>

#include "absl/status/statusor.h"
#include "config/run_config.h"
#include "engine/backend.h"
#include "testbed/partitioner.h"
#include "testbed/registry.h"
#include "testbed/step_inputs.h"

namespace testbed {

// The chain's kinds in order: partitioner first.
[[nodiscard]] std::span<const ComponentKind> PlanningChainKinds() noexcept;

// Adds the chain's refining kinds to a backend's kinds as optional (the partitioner the
// backend lists itself, with its default).
void AddPlanningKinds(BackendInfo& info);

struct PlanningOutcome {
  Plan plan;
  MetricSet metrics;  // planning_time_s, and <kind>_time_s per refining kind that ran
};

// Runs the partitioner of `run`, then every refining kind the run names, in chain order, over
// one plan and `inputs`. `ctx` is the planning context (its evaluate callback may read
// `inputs`). The plan is validated after every step; an error names the component.
[[nodiscard]] absl::StatusOr<PlanningOutcome> RunPlanningChain(const ResolvedRun& run, const Registry& registry,
                                                              const PlanningContext& ctx, StepInputs& inputs);

}  // namespace testbed
