#include "engine/planning_chain.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/stage_costs.h"
#include "testbed/plan_refiner.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

constexpr ComponentKind kChain[] = {ComponentKind::kPartitioner, ComponentKind::kTpPlanner, ComponentKind::kLoadBalancer,
                                    ComponentKind::kPrecisionPolicy, ComponentKind::kShardPlanner,
                                    ComponentKind::kFeatureLoader};

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::span<const ComponentKind> PlanningChainKinds() noexcept { return kChain; }

void AddPlanningKinds(BackendInfo& info) {
  for (ComponentKind kind : PlanningChainKinds()) {
    if (kind == ComponentKind::kPartitioner) continue;
    bool listed = false;
    for (const KindUse& u : info.kinds) listed = listed || u.kind == kind;
    if (!listed) info.kinds.push_back(KindUse{kind, false, ""});
  }
}

absl::StatusOr<PlanningOutcome> RunPlanningChain(const ResolvedRun& run, const Registry& registry,
                                                const PlanningContext& ctx, StepInputs& inputs) {
  PlanningOutcome out;
  const int layers = static_cast<int>(ctx.model.layers.size());
  const ComponentChoice* part = run.Component(ComponentKind::kPartitioner);
  if (part == nullptr) return absl::InvalidArgumentError("the run names no partitioner");
  TESTBED_ASSIGN_OR_RETURN(auto partitioner, registry.Create<Partitioner>(part->name, part->params));
  auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<Plan> plan = CallPlugin("partitioner", part->name, [&] { return partitioner->Partition(ctx); });
  double total = Since(t0);
  if (!plan.ok()) return plan.status();
  if (absl::Status st = plan->Validate(layers, ctx.cluster); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("partitioner '", part->name, "' made an invalid plan: ", st.message()));
  }
  out.plan = std::move(*plan);
  for (ComponentKind kind : PlanningChainKinds()) {
    if (kind == ComponentKind::kPartitioner) continue;
    const ComponentChoice* choice = run.Component(kind);
    if (choice == nullptr) continue;
    TESTBED_ASSIGN_OR_RETURN(std::shared_ptr<Component> made, registry.CreateEntry(kind, choice->name, choice->params));
    auto* refiner = dynamic_cast<PlanRefiner*>(made.get());
    if (refiner == nullptr) {
      return absl::InternalError(absl::StrCat(KindName(kind), " '", choice->name,
                                              "' does not implement the refining interface of the planning chain "
                                              "(testbed/plan_refiner.h)"));
    }
    RefineContext rc{ctx, out.plan, inputs};
    t0 = std::chrono::steady_clock::now();
    absl::Status st = CallPlugin(KindName(kind), choice->name, [&] { return refiner->Refine(rc); });
    const double took = Since(t0);
    total += took;
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat(KindName(kind), " '", choice->name, "': ", st.message()));
    if (absl::Status v = out.plan.Validate(layers, ctx.cluster); !v.ok()) {
      return absl::Status(v.code(), absl::StrCat(KindName(kind), " '", choice->name, "' left an invalid plan: ", v.message()));
    }
    out.metrics.Add(absl::StrCat(KindName(kind), "_time_s"), took, "s", Better::kLower);
  }
  out.metrics.Add("planning_time_s", total, "s", Better::kLower);
  return out;
}

}  // namespace testbed
