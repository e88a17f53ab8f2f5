// Partitioner component "dapple": the DAPPLE-style planner as a baseline for AutoPipe, at the
// requested degrees or searching them, with link times from the cluster.
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
