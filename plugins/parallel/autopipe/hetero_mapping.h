// AutoPipe-H (IEEE TC 2024), the heterogeneity-aware extension of AutoPipe: its device-mapping
// component assigns the pipeline stages to devices considering the servers' heterogeneity
// (GPU kinds of different speed, one NIC per server), to reduce communication contention and
// let the balanced partition account for each stage's own speed. Mappings weighed, each a
// device order filled stage by stage (replicas of a stage side by side) or pipeline by
// pipeline (a pipeline's stages side by side):
//   cluster:   the cluster's order, stage by stage (Megatron-LM's, heterogeneity-blind);
//   fast-first: servers sorted fastest kind first, stage by stage;
//   pipelines: servers sorted fastest kind first, pipeline by pipeline (a pipeline inside a
//              server where it fits: its activations never cross a NIC).
// For each: every stage costed on its slowest replica's kind, AutoPipe's sub-layer items split
// exactly by min-max under those per-stage costs (the core's MinMaxContiguousSplit), refined by
// moving one item across a boundary while AutoPipe's light 1F1B simulation (with each
// boundary's transfer over the slowest replica's path, slowed by the flows sharing its NIC)
// improves; the mapping of the fastest simulated iteration, plus the data-parallel all-reduce
// over the NICs, wins.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/partitioner.h"

namespace testbed::autopipe {

struct HeteroMapping {
  std::string name;
  std::vector<DeviceId> device_map;  // [d * pp + s] (tp 1)
  std::vector<StageSpec> stages;
  double predicted_s = 0;  // light-simulated 1F1B plus the all-reduce
  int candidates = 0;      // partitions simulated
};

// The best mapping for pp x dp (tp 1) with `micro_batches` per replica; `all` receives every
// mapping weighed (for metrics), best first.
[[nodiscard]] absl::StatusOr<HeteroMapping> MapHeterogeneous(const PlanningContext& ctx, int pp, int dp,
                                                             int micro_batches, std::vector<HeteroMapping>* all = nullptr);

}  // namespace testbed::autopipe
