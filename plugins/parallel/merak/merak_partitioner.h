// Merak's automatic partitioner: degrees and micro-batch size from the core search, stages
// balanced on the proxy graph, stage-aware recomputation at the smallest ratio that fits and
// sub-pipelined tensor parallelism requested from the scheduler; each technique can be off.
#pragma once

#include <map>
#include <tuple>

#include "recompute_choice.h"
#include "testbed/partitioner.h"

namespace testbed::merak {

struct MerakOptions {
  bool search = true;              // choose degrees and micro-batch size; else [parallel] and [train]
  bool proxy_graph_stages = true;  // false: Megatron-LM's uniform block split
  RecomputePolicy recompute = RecomputePolicy::kStageAware;
  int tp_chunks = 2;               // sub-pipelined tensor parallelism (1: off)
  bool shifted_critical_path = true;  // plan for the shifted schedule (stage P-2's ratio)
  int zero_stage = 1;                 // optimizer-state sharding (DeepSpeed's engine: at most 1 with pipelining)
};

class MerakPartitioner final : public Partitioner {
 public:
  explicit MerakPartitioner(MerakOptions options) noexcept : o_(options) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  // Re-partitions `plan` on the proxy graph at its own TP degree and micro-batch size, chooses
  // the recomputation and sets the hints; returns the plan's metrics.
  absl::StatusOr<MetricSet> Finish(const PlanningContext& ctx, Plan& plan);

  MerakOptions o_;
  int evaluations_ = 0;
};

}  // namespace testbed::merak
