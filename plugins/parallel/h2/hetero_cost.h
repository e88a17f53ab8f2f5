// HeteroAuto's cost model (H2): what a heterogeneous pipeline costs per iteration and whether
// each stage fits its chip, from the device model's layer times on each chip type, the
// memory model and the cluster's links. A layout is a list of stage groups in pipeline order
// (the consecutive stages one chip type runs, with that type's tensor- and data-parallel
// degrees) and the model units (embedding, blocks, head) of every stage.
//
// Per stage i (pipeline order, P stages) of a group with data-parallel degree d, each replica
// runs m_i = M / d of the iteration's M micro-batches, t_i seconds each (forward and backward
// of its units on its chip at its TP degree, plus the TP all-reduces inside its node). A
// boundary carries each micro-batch's activation forward and its gradient back, c_i seconds
// (device-direct, or staged through host memory across vendors). 1F1B's iteration is the
// longest span of a stage: the forwards before it, its warmup forwards or the wait for its
// first gradient, the rest of its m_i micro-batches without a gap (each waiting for one way of
// a boundary whose other side is nearly as slow), and the backwards after it; plus the
// data-parallel all-reduce that the backward still to come does not hide. Memory of stage i: weights, gradients and optimizer
// state of its units (ZeRO as asked) and min(m_i, P - i) micro-batches of activations.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "chip_types.h"
#include "testbed/partitioner.h"

namespace testbed::h2 {

struct StageGroup {
  int type = 0;    // index into the chip types
  int stages = 1;  // consecutive pipeline stages
  int tp = 1;
  int dp = 1;
  friend bool operator==(const StageGroup&, const StageGroup&) = default;
};

struct Layout {
  std::vector<StageGroup> groups;  // pipeline order
  std::vector<int> units;          // model units per stage, pipeline order
  [[nodiscard]] int num_stages() const noexcept;
  // (group, index of the group's first stage) of stage i.
  [[nodiscard]] int GroupOf(int stage) const noexcept;
};

// One unit on one chip type at one TP degree, per micro-batch.
struct UnitCost {
  double compute_s = 0;     // forward + backward (+ recomputation), TP all-reduces included
  double backward_s = 0;    // of which backward
  double params = 0;        // per tensor-parallel rank
  double activation = 0;    // bytes kept for backward
  double output_bytes = 0;  // activation handed to the next unit
};

struct Estimate {
  double iteration_s = 0;
  bool fits = true;
  int worst_stage = -1;     // the stage shortest of memory (or the fullest when all fit)
  double worst_need_bytes = 0, worst_have_bytes = 0;
};

class CostModel {
 public:
  // Errors: InvalidArgument without a global batch that divides into micro-batches.
  [[nodiscard]] static absl::StatusOr<CostModel> Make(const PlanningContext& ctx, std::vector<ChipType> types);

  [[nodiscard]] const std::vector<ChipType>& types() const noexcept { return types_; }
  [[nodiscard]] std::int64_t micro_batches() const noexcept { return micro_batches_; }  // M, the iteration's
  [[nodiscard]] int num_units() const noexcept { return static_cast<int>(bounds_.size()) - 1; }
  [[nodiscard]] const std::vector<int>& unit_bounds() const noexcept { return bounds_; }
  [[nodiscard]] const PlanningContext& ctx() const noexcept { return ctx_; }

  // Costs of every unit on `type` at degree `tp` (computed once per pair).
  [[nodiscard]] absl::StatusOr<const std::vector<UnitCost>*> Units(int type, int tp);
  // Static bytes per parameter held on one rank of a stage with `dp` replicas.
  [[nodiscard]] double StaticBytesPerParam(int dp) const;
  // Seconds one micro-batch's activation (and its gradient back) takes across the boundary
  // after stage `stage` of `layout`.
  [[nodiscard]] double BoundaryTime(const Layout& layout, int stage, double bytes) const;
  // Device of (stage, replica, tp rank) of a layout: each type's devices in cluster order,
  // the group's replicas outermost, then its stages, TP ranks innermost.
  [[nodiscard]] DeviceId DeviceOf(const Layout& layout, int stage, int replica, int rank) const;
  [[nodiscard]] absl::StatusOr<Estimate> Evaluate(const Layout& layout);

 private:
  CostModel(const PlanningContext& ctx, std::vector<ChipType> types) : ctx_(ctx), types_(std::move(types)) {}
  const PlanningContext& ctx_;
  std::vector<ChipType> types_;
  std::vector<int> bounds_;
  std::int64_t micro_batches_ = 1;
  std::map<std::pair<int, int>, std::vector<UnitCost>> units_;
};

}  // namespace testbed::h2
