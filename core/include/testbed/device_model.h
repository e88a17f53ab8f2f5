// Kind `device_model`: how long an op takes on a device, and how much memory it needs.
// The simulator asks it for the time of every compute task; planners use it to cost
// layers. Implementations: a roofline model and a model calibrated from measurements.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "testbed/component.h"
#include "testbed/device_spec.h"
#include "testbed/model_graph.h"

namespace testbed {

enum class Phase : std::uint8_t { kForward, kBackward, kRecompute };
[[nodiscard]] const char* PhaseName(Phase phase) noexcept;

// The part of a layer a task runs. A MoE layer under expert parallelism runs as its gate
// (norm, router, token permutation) on each rank, then its experts on the tokens each rank
// received (LayerWork::expert_tokens). A backward split in two (ExpandOptions::split_backward)
// runs the input gradients first (kBackwardData: every kernel but the weight-gradient GEMMs,
// on the path to the layers before) and the weights' gradients later (kBackwardWeights). A
// forward in parts of its time steps (kTimeSlice) runs the share `fraction` of the sequence's
// steps for the whole micro-batch (a recurrent layer's step kernels keep their batch).
enum class LayerPart : std::uint8_t { kWhole, kMoeGate, kMoeExperts, kBackwardData, kBackwardWeights, kTimeSlice };
[[nodiscard]] const char* LayerPartName(LayerPart part) noexcept;

// The work of one layer on one device for one micro-batch.
struct LayerWork {
  const Layer* layer = nullptr;
  Phase phase = Phase::kForward;
  std::int64_t micro_batch = 1;  // sequences
  int tp = 1;                    // tensor-parallel degree the layer is split over
  bool sequence_parallel = false;
  // Arithmetic precision; activations are stored at its width (int8: 1 byte, int4: half).
  Precision precision = Precision::kFp16;
  // Fraction of the micro-batch this task covers (sub-batches of Oases / Merak's
  // sub-pipelined TMP run a layer on half or a quarter of a micro-batch).
  double fraction = 1.0;
  // Backward of an attention layer under selective recomputation: it first recomputes the
  // attention core (scores, softmax, dropout, context) whose activations were not kept.
  bool selective_recompute = false;
  LayerPart part = LayerPart::kWhole;
  // kMoeExperts: tokens this device's experts process (a token routed to k experts here
  // counts k times); micro_batch and fraction are then ignored.
  double expert_tokens = 0;
};

class DeviceModel : public Component {
 public:
  static constexpr ComponentKind kKind = ComponentKind::kDeviceModel;

  // Time of one layer's forward, backward or recompute on `device`. Excludes the
  // tensor-parallel communication (that is a collective of its own). A layer with measured
  // times (LayerKind::kGiven) costs what it was given, scaled to the work's samples (recompute
  // as forward); every other layer goes to ComputeLayerTime. A part of a split backward
  // (LayerPart::kBackwardData, kBackwardWeights) costs what ComputeLayerTime gives it where
  // the model prices the parts (PricesBackwardParts), else half the whole backward.
  [[nodiscard]] absl::StatusOr<double> LayerTime(const LayerWork& work, const DeviceSpec& device) const;

  // Time of a generic kernel doing `flops` of arithmetic at `precision` and moving `bytes`
  // through device memory (optimizer steps, compression encode and decode, ...).
  [[nodiscard]] virtual absl::StatusOr<double> KernelTime(double flops, double bytes,
                                                          Precision precision,
                                                          const DeviceSpec& device) const = 0;

  // Whether ComputeLayerTime prices the input-gradient and weight-gradient parts of a split
  // backward apart (from the kernels of each part, say).
  [[nodiscard]] virtual bool PricesBackwardParts() const noexcept { return false; }

 protected:
  // The model's own cost of a layer. Inputs: a layer of a ModelGraph, a positive micro-batch
  // and TP degree dividing the layer's heads. Errors: InvalidArgument for impossible work,
  // Unimplemented for a layer kind it cannot cost.
  [[nodiscard]] virtual absl::StatusOr<double> ComputeLayerTime(const LayerWork& work,
                                                                const DeviceSpec& device) const = 0;
};

}  // namespace testbed
