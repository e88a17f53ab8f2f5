// Megatron-LM's pipeline schedules: 1F1B (PipeDream-Flush) and interleaved 1F1B with
// virtual stages (Narayanan et al. 2021).
#pragma once

#include "testbed/pipeline_program.h"

namespace testbed::megatron {

class OneFOneB final : public Scheduler {
 public:
  explicit OneFOneB(ExpandOptions o) : o_(o) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override;

 private:
  ExpandOptions o_;
};

class Interleaved final : public Scheduler {
 public:
  explicit Interleaved(ExpandOptions o) : o_(o) {}
  [[nodiscard]] absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override;

 private:
  ExpandOptions o_;
};

}  // namespace testbed::megatron
