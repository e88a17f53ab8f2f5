// Building and searching parallel plans: what every planner (Megatron-LM's and DeepSpeed's
// baselines, Merak, AutoPipe, ...) needs around its own partitioning rule. A planner gives
// a stage rule (how to split the layers into pp x chunks stages); the search tries degrees
// (TP, PP, DP), micro-batch sizes and recomputation the way a careful user of a framework
// does, scores each candidate with the run's simulator when there is one, and keeps the best
// plan that fits in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/partitioner.h"
#include "testbed/plan.h"

namespace testbed {

// Layer-index boundaries of the model's "units": the embedding (with nothing else), each
// transformer block (attention + MLP/MoE), and the head. unit_begin[i]..unit_begin[i+1].
[[nodiscard]] std::vector<int> UnitBoundaries(const ModelGraph& model);
// Stages from a split of units into contiguous parts: parts[k] = units in stage k.
[[nodiscard]] std::vector<StageSpec> StagesFromUnitCounts(const ModelGraph& model, const std::vector<int>& parts);
// Megatron-LM's split: transformer blocks evenly over `parts` (earlier ones take the
// remainder); the embedding joins the first part and the head the last.
[[nodiscard]] absl::StatusOr<std::vector<StageSpec>> UniformBlockStages(const ModelGraph& model, int parts);
// The contiguous split of `weights` into `parts` non-empty parts that minimises the largest
// part's sum (exact: binary search on the bound with a greedy check, then a greedy fill).
[[nodiscard]] std::vector<int> MinMaxPartition(const std::vector<double>& weights, int parts);

// The contiguous split of `n` items into `parts` non-empty parts minimising the largest part's
// cost, where part p holding items [first, end) costs part_cost(p, first, end): non-decreasing
// as the range grows, +infinity where the part cannot hold the range (memory). Parts may
// differ (heterogeneous stages: each its own speed and memory). Bisection on the bound (to
// 1e-9 relative) with an exact check: a greedy split when it succeeds, else the positions each
// part can end at, O(parts x n) calls of part_cost, so part_cost should be O(1) (prefix sums). nullopt when no split is
// feasible. `upper` bounds the optimum (a part's cost of every item, say).
using PartCost = std::function<double(int part, int first, int end)>;
[[nodiscard]] std::optional<std::vector<int>> MinMaxContiguousSplit(int n, int parts, const PartCost& part_cost,
                                                                    double upper);

// Marks the recomputation of a plan's stages: full recomputes every layer of every stage.
void ApplyRecompute(Plan& plan);

// Builds a plan with the given degrees from [train] and the stage rule, Megatron-LM's device
// order, and the request's recomputation. dp = 0: devices / (tp x pp). Errors name what does
// not divide.
using StageRule = std::function<absl::StatusOr<std::vector<StageSpec>>(int pp, int chunks)>;
[[nodiscard]] absl::StatusOr<Plan> MakePlan(const PlanningContext& ctx, int tp, int pp, int dp, int chunks,
                                            std::int64_t micro_batch, RecomputeMode recompute, const StageRule& rule);

struct SearchSpace {
  std::vector<int> tp;                 // candidate TP degrees
  std::vector<int> pp;                 // candidate pipeline depths
  std::vector<std::int64_t> micro_batch;
  std::vector<RecomputeMode> recompute;
  int chunks = 1;                      // virtual stages per pipeline stage
  bool tp_within_node = true;          // never split a TP group across nodes
};

// The space a careful user would try: TP in powers of two up to the devices of a node,
// dividing the heads; every PP that divides both the blocks and the devices left; micro-batch
// sizes in powers of two dividing the per-replica batch; recomputation none, selective
// (when TP > 1 with sequence parallelism) and full.
[[nodiscard]] SearchSpace DefaultSearchSpace(const PlanningContext& ctx);

// Without a simulator: 1F1B with its slowest stage setting the pace, (m + p - 1) x that
// stage's forward, backward and recomputation of one micro-batch; communication ignored.
// Metrics: iteration_time_s, throughput_samples_per_s.
[[nodiscard]] absl::StatusOr<MetricSet> EstimateOneFOneB(const PlanningContext& ctx, const Plan& plan);

struct SearchResult {
  Plan plan;
  MetricSet metrics;  // of the chosen plan
  int candidates = 0; // plans built
  int evaluated = 0;  // plans scored (fit in memory and ran)
};

// Scores every candidate (PlanningContext::evaluate when set, else an analytic 1F1B estimate
// from the device model) and returns the one of highest throughput. Candidates that do not
// fit are skipped. Fails with ResourceExhausted when none fits, listing why.
[[nodiscard]] absl::StatusOr<SearchResult> SearchPlans(const PlanningContext& ctx, const SearchSpace& space,
                                                       const StageRule& rule);

}  // namespace testbed
