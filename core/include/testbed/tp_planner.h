// Kind `tp_planner`: model graph and cluster -> the tensor-parallel degree of every layer. A
// layer of degree t on a stage of D devices runs as D / t groups of t devices, each on its
// share of the samples (data parallelism = devices / TP, per layer: Oases). Megatron-LM's
// uniform degree and Oases' per-op integer program implement it; it runs in the planning
// chain right after the partitioner.
//
// Version 1 of the interface:
//   Assign(input) -> one degree per ModelGraph layer, in layer order (the embedding and head
//   too). The core (not the planner), in Refine: checks each degree (at least 1; divides the
//   attention heads, the hidden size and the FFN size of its layer; the error names the layer
//   and why), sets every stage's degree to the largest of its layers' (it must divide the
//   stage's devices and be a multiple of every layer degree of the stage), regroups the
//   stage's devices in their order into replicas of that degree, scales the micro-batch so
//   that every device keeps its samples per micro-batch (micro_batch x new / old degree; the
//   same factor on every stage, a whole number), writes the degrees into Plan::layers and adds
//   the planner's metrics and tables, with tp_degree_max, tp_degree_min and tp_segments (runs
//   of equal degree along the layers), to the plan.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/metrics.h"
#include "testbed/plan.h"
#include "testbed/plan_refiner.h"

namespace testbed {

inline constexpr int kTpPlannerVersion = 1;

struct TpAssignment {
  std::vector<int> degrees;        // per model layer
  MetricSet metrics;               // what the planner measured (planning time, predicted time, ...)
  std::vector<Table> tables;       // per-op tables (costs, the choice)
};

// Samples each device of stage `stage` works on per micro-batch (micro_batch / stage degree;
// the planner's per-group batch at degree t is t times this).
[[nodiscard]] double SamplesPerDevice(const Plan& plan, int stage);
// The devices of a stage in plan order (replica by replica, rank by rank).
[[nodiscard]] std::vector<DeviceId> StageDevices(const Plan& plan, int stage);
// OK when `degree` splits layer `layer` (heads, hidden and FFN divisible), else
// InvalidArgument naming the layer and the dimension it does not divide.
[[nodiscard]] absl::Status CheckLayerDegree(const Layer& layer, int degree);
// The plan with `degrees` applied as Refine describes (the core's half of Refine).
[[nodiscard]] absl::Status ApplyTpDegrees(const ModelGraph& model, const std::vector<int>& degrees, Plan& plan);

class TpPlanner : public PlanRefiner {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kTpPlanner;

  // InvalidArgument when no degree suits a layer; ResourceExhausted when no assignment fits
  // in memory (the message says which op needs what).
  [[nodiscard]] virtual absl::StatusOr<TpAssignment> Assign(const RefineContext& ctx) = 0;

  [[nodiscard]] absl::Status Refine(RefineContext& ctx) final;
};

}  // namespace testbed
