// Partitioner component "piper": the Piper-style planner as a baseline for AutoPipe. Given
// the degrees ([parallel]) or searching them like Megatron-LM's baseline, it splits whole
// layers into stages with Piper's dynamic programme and per-stage recomputation choice.
#pragma once

#include "testbed/partitioner.h"

namespace testbed::piper {

class PiperPartitioner final : public Partitioner {
 public:
  explicit PiperPartitioner(bool search) noexcept : search_(search) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  bool search_;
};

}  // namespace testbed::piper
