// Partitioner component "dapple": the DAPPLE-style planner as a baseline for AutoPipe. Given
// the degrees ([parallel]) or searching them like Megatron-LM's baseline, it splits whole
// layers into stages by DAPPLE's recursive split and latency model, with link times from the
// cluster (stage-to-stage transfers, data-parallel gradient all-reduce).
#pragma once

#include "testbed/partitioner.h"

namespace testbed::dapple {

class DapplePartitioner final : public Partitioner {
 public:
  explicit DapplePartitioner(bool search) noexcept : search_(search) {}
  [[nodiscard]] absl::StatusOr<Plan> Partition(const PlanningContext& ctx) override;

 private:
  bool search_;
};

}  // namespace testbed::dapple
