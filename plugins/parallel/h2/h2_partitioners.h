// H2's partitioners (HyperHetero: training on chips of several vendors).
//   h2.hetero_pp:   HeteroPP. The user gives the stage groups (chip types in pipeline order,
//                   stages, TP and DP per type); the layers are split non-uniformly over
//                   the stages by each chip's speed and memory (SplitUnits), or as given.
//   h2.hetero_auto: HeteroAuto. Searches the stage groups and the split (SearchLayouts) by
//                   the cost model, then simulates the finalists and keeps the fastest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetero_search.h"
#include "testbed/partitioner.h"

namespace testbed::h2 {

struct HeteroPpSettings {
  std::vector<std::string> order;  // chip types along the pipeline; empty: the cluster's order
  std::vector<std::int64_t> stages, tp, dp;  // per entry of order; empty: see the plugin's docs
  std::vector<std::int64_t> units;           // per stage; empty: HeteroPP's split
};

class HeteroPp final : public Partitioner {
 public:
  explicit HeteroPp(HeteroPpSettings settings) : settings_(std::move(settings)) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  HeteroPpSettings settings_;
};

class HeteroAuto final : public Partitioner {
 public:
  explicit HeteroAuto(SearchOptions options) : options_(options) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  SearchOptions options_;
};

}  // namespace testbed::h2
