// What Oases' planner reads about each op of the chain (attention and MLP of every layer) at
// each candidate tensor-parallel degree, and the integer program built from it. The public
// planner reads a profile of the RTX 3090 (forward, backward and all-reduce time of each op
// at each degree and batch); here the run's device model gives the compute and a ring over
// the cluster's routes gives the all-reduce, so the planner sees the hardware the simulator
// runs.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "chain_solver.h"
#include "testbed/partitioner.h"

namespace testbed::oases {

struct CostSettings {
  // Oases: costs at half the per-group batch (two sub-batches), each op max(compute, comm).
  // false (Alpa-style): costs at the whole per-group batch, each op compute + comm.
  bool overlap = true;
  double memory_fraction = 0.95;  // of the device's memory
};

struct OpCosts {
  std::vector<int> ops;      // model layer of each op of the chain
  std::vector<int> degrees;  // candidate degrees, ascending (the ILP's strategies)
  std::vector<double> group_batch;  // per candidate: samples per tensor-parallel group
  // [op][candidate], seconds (at half the group batch with overlap) and bytes.
  std::vector<std::vector<double>> fwd, bwd, comm, memory;
  std::vector<double> runtime_memory;  // per candidate: what the chain's ops do not count
  double budget = 0;                   // bytes
};

// Seconds of a ring all-reduce of `bytes` over `group` on the cluster's routes: 2 (n - 1)
// steps, each moving bytes / n from every member to the next, as long as the most loaded
// link takes, plus the slowest hop's latency.
[[nodiscard]] double RingAllReduceSeconds(const Cluster& cluster, const std::vector<DeviceId>& group, double bytes);

// Costs of every op of stage 0's devices (the plan's samples per device kept). Candidates:
// powers of two that divide the stage's devices and every op's heads, hidden and FFN sizes,
// with a group batch above 1 sample (the public planner's filter). InvalidArgument when the
// model is not a chain of attention and MLP ops or no degree is left.
[[nodiscard]] absl::StatusOr<OpCosts> MeasureOps(const PlanningContext& ctx, const Plan& plan, const CostSettings& s);

// The public planner's objective and memory constraint over these costs (Oases), or the same
// program without overlap (Alpa-style: each op costs compute + communication).
[[nodiscard]] ChainProblem BuildProblem(const OpCosts& c, bool overlap);

// The public runtime's layout from the ILP's per-op degrees: the two most frequent degrees
// (ties: the first met), the lower one on the first (count of the lower) / 2 layers, the
// higher one on the rest; a single degree stays uniform. Returns per-op degrees.
[[nodiscard]] std::vector<int> TwoSegments(const std::vector<int>& per_op);

}  // namespace testbed::oases
