// A heterogeneous layout as the core's plan: one Stage per pipeline stage, on its chip type
// (Stage::device_type) at its group's TP degree, with the group's replicas each running
// M / dp of the iteration's micro-batches. Devices: each chip type's in cluster order, the
// group's replicas outermost, then its stages, TP ranks innermost (TP inside a node, and
// consecutive stages of one type next to each other).
#pragma once

#include "absl/status/statusor.h"
#include "hetero_cost.h"

namespace testbed::h2 {

// Checks that the groups use every chip of every type exactly (stages x tp x dp summed over
// a type's groups equals its chip count), that each degree is positive, that each TP degree
// fits in a node and divides the heads and that each dp divides M; errors name the chip type.
[[nodiscard]] absl::Status CheckGroups(const CostModel& model, const std::vector<StageGroup>& groups);
// CheckGroups, and one unit count per stage, each at least 1, covering the model; errors name
// the stage.
[[nodiscard]] absl::Status CheckLayout(const CostModel& model, const Layout& layout);

// The plan of a checked layout (recomputation and ZeRO as [parallel] asks).
[[nodiscard]] absl::StatusOr<Plan> BuildPlan(const CostModel& model, const Layout& layout);

// "a100x8(tp2,dp4)|h100x4(tp4,dp4)" and units "3,3,2|...": for notes and metrics.
[[nodiscard]] std::string Describe(const CostModel& model, const Layout& layout);

}  // namespace testbed::h2
