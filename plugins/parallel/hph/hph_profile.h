// What HPH measures before planning: per device kind of the cluster, each model unit's
// (embedding, block, head) forward and backward time per micro-batch, parameters, the
// activations it keeps, its checkpoint when recomputed, and the activation it hands on.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/partitioner.h"

namespace testbed::hph {

struct UnitProfile {
  double fwd_s = 0, bwd_s = 0;  // per micro-batch
  double params = 0;
  double activation = 0;        // bytes kept for backward per micro-batch
  double checkpoint = 0;        // bytes kept when the unit is recomputed
  double output_bytes = 0;      // handed to the next unit per micro-batch
};

class Profiles {
 public:
  // Costs at `micro_batch` sequences per micro-batch.
  Profiles(const PlanningContext& ctx, std::int64_t micro_batch);
  [[nodiscard]] std::int64_t micro_batch() const noexcept { return micro_batch_; }
  // The units' costs on devices of `device`'s kind (computed once per kind).
  [[nodiscard]] absl::StatusOr<const std::vector<UnitProfile>*> Of(DeviceId device);
  [[nodiscard]] int num_units() const noexcept { return static_cast<int>(bounds_.size()) - 1; }
  [[nodiscard]] const std::vector<int>& bounds() const noexcept { return bounds_; }
  // Seconds for one micro-batch through every unit on `device` (forward and backward).
  [[nodiscard]] absl::StatusOr<double> ModelTime(DeviceId device);

 private:
  const PlanningContext& ctx_;
  std::int64_t micro_batch_ = 1;
  std::vector<int> bounds_;
  std::map<std::string, std::vector<UnitProfile>> by_kind_;
};

}  // namespace testbed::hph
