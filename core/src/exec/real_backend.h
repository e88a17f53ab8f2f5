// Backend "real": trains the model for real with the executor, on ranks given by the
// `communicator` component (threads with `local`; MPI processes under mpirun with `mpi`),
// under the run's plan and schedule. Reports the loss curve, checks it (and the gradient
// norms) against single-process training of the same model on the same data, measures every
// task's time, and puts the simulator's prediction for the same schedule beside the measured
// iteration time.
#pragma once

#include "engine/backend.h"

namespace testbed {

class RealBackend final : public Backend {
 public:
  [[nodiscard]] static const BackendInfo& Info();
  [[nodiscard]] const BackendInfo& info() const noexcept override { return Info(); }
  [[nodiscard]] absl::StatusOr<RunOutput> Run(const ResolvedRun& run, const Registry& registry,
                                              const RunControl& control) override;
};

}  // namespace testbed
