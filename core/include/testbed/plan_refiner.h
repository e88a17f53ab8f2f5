// The planning kinds that come after the partitioner (tp_planner, load_balancer,
// precision_policy, feature_loader, ...): each takes the plan so far and refines it (per-layer
// degrees, expert placement, per-layer precision) and the inputs of every iteration (routing,
// placement per step, host copies). The backends run them in the order of the planning chain
// (DESIGN.md §3) over one Plan, so a new kind plugs in by deriving its interface from
// PlanRefiner and taking its place in the chain, without a change to any backend.
#pragma once

#include "absl/status/status.h"
#include "testbed/component.h"
#include "testbed/partitioner.h"
#include "testbed/plan.h"
#include "testbed/step_inputs.h"

namespace testbed {

struct RefineContext {
  // Model, cluster, training settings, the run's [parallel] request, the device model, the
  // seed and (in the simulator backend) `evaluate`, which scores a plan with the simulator
  // and the per-step inputs below.
  const PlanningContext& planning;
  Plan& plan;
  // One entry per iteration of the run (train.steps), filled by earlier kinds or traces.
  StepInputs& inputs;
};

class PlanRefiner : public Component {
 public:
  // Changes `ctx.plan` and `ctx.inputs`. The plan must still satisfy Plan::Validate.
  // Errors: InvalidArgument when the plan does not suit the component (a MoE balancer on a
  // dense model), ResourceExhausted when nothing it could choose fits.
  [[nodiscard]] virtual absl::Status Refine(RefineContext& ctx) = 0;
};

}  // namespace testbed
