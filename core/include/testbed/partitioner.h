// Kind `partitioner`: chooses the parallel plan of a run: degrees (TP, PP, DP), micro-batch
// size and count, pipeline stages as layer ranges, recomputation and the device mapping.
// Baselines (Megatron-LM's uniform split, DeepSpeed's parameter split) and techniques
// (Merak, AutoPipe, ...) implement it.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "testbed/cluster.h"
#include "testbed/component.h"
#include "testbed/device_model.h"
#include "testbed/metrics.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"

namespace testbed {

class Collective;

// Everything a planner may look at. References stay valid for the duration of the call.
struct PlanningContext {
  const ModelGraph& model;
  const Cluster& cluster;
  const TrainSettings& train;
  const ParallelSettings& parallel;
  const DeviceModel& device_model;
  std::uint64_t seed = 0;
  // Scores a candidate plan with the run's scheduler and the simulator, returning its
  // metrics (iteration_time_s, memory_peak_bytes, ...). Set by the simulator backend;
  // empty elsewhere, so check before calling.
  std::function<absl::StatusOr<MetricSet>(const Plan&)> evaluate;
  // The run's collective model, with which the simulator will cost the plan's collectives
  // (a planner that prices communication can use the same one). Set by the simulator
  // backend; nullptr elsewhere.
  const Collective* collective = nullptr;
};

class Partitioner : public Component {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kPartitioner;

  // Returns a plan for `ctx`. The plan must satisfy Plan::Validate. Errors:
  // InvalidArgument when the request cannot be met (degrees that do not divide the
  // cluster, more stages than layers), ResourceExhausted when no plan fits in memory.
  [[nodiscard]] virtual absl::StatusOr<Plan> Partition(const PlanningContext& ctx) = 0;
};

}  // namespace testbed
