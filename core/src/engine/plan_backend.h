// Backend "plan": runs the planners only (partitioner with its device model) and reports
// the plan: degrees, stage boundaries, per-stage compute time and parameter count, the
// balance of the stages (max / mean stage time) and the planning time. Used to compare
// partitioners (AutoPipe against DAPPLE and Piper) without simulating an iteration.
#pragma once

#include "engine/backend.h"

namespace testbed {

class PlanBackend final : public Backend {
 public:
  [[nodiscard]] static const BackendInfo& Info();
  [[nodiscard]] const BackendInfo& info() const noexcept override { return Info(); }
  [[nodiscard]] absl::StatusOr<RunOutput> Run(const ResolvedRun& run, const Registry& registry,
                                              const RunControl& control) override;
};

}  // namespace testbed
