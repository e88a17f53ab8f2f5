// Kind `precision_policy`: model graph -> the bit widths of each layer's weights, activations
// and gradients (Plan::layers[i].precision). Uniform precision and DPC (widths decreasing
// with layer capacity) implement it. It runs in the planning chain after the partitioner
// (and tp_planner, load_balancer); the backends then cost each layer at its widths (the
// simulator: compute on the units of that width, stored and sent bytes at that width; the
// executor: fake-quantised matrix products).
//
// Version 1 of the interface:
//   Assign(ctx) -> one LayerPrecision per ModelGraph layer, in layer order. A width is 0
//   (the run's precision, TrainSettings::precision), 2 to 8 (integers), 16 (the run's 16-bit
//   format) or 32 (fp32).
// The core (not the policy) writes the widths into the plan and reports, per layer and in
// total, the multiply-accumulates and BitOPs of a forward pass of one sample, and the
// policy's BitOPs relative to fp32 and to uniform 8-bit (DPC's cost measure).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/metrics.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"
#include "testbed/plan_refiner.h"

namespace testbed {

inline constexpr int kPrecisionPolicyVersion = 1;

// Forward multiply-accumulates of one sample of `layer` (half its forward FLOPs).
[[nodiscard]] double ForwardMacsPerSample(const Layer& layer) noexcept;

// BitOPs of a forward pass of one sample: sum over layers of MACs x weight bits x activation
// bits (a width of 0 counts as `run_precision`'s bits).
[[nodiscard]] double ForwardBitOps(const ModelGraph& model, const std::vector<LayerPrecision>& bits,
                                   Precision run_precision);

// The index of the layer named `name`, or InvalidArgument naming `what`, the name and a few
// of the model's layer names.
[[nodiscard]] absl::StatusOr<int> LayerIndexByName(const ModelGraph& model, const std::string& name,
                                                   const std::string& what);

class PrecisionPolicy : public PlanRefiner {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kPrecisionPolicy;

  // The widths of every layer of ctx.planning.model. InvalidArgument for a width outside the
  // supported set or a setting that names a layer the model does not have.
  [[nodiscard]] virtual absl::StatusOr<std::vector<LayerPrecision>> Assign(const RefineContext& ctx) = 0;

  // Calls Assign, checks its answer, writes it into the plan and adds the BitOPs figures
  // (metrics forward_bitops_per_sample, bitops_vs_fp32, bitops_vs_uniform8; table
  // layer_precision) to the plan's planner metrics and tables.
  [[nodiscard]] absl::Status Refine(RefineContext& ctx) final;
};

}  // namespace testbed
