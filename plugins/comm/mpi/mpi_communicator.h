// The `mpi` communicator: one rank per MPI process (`mpirun -np N testbed run x.toml`),
// OpenMPI's non-blocking collectives underneath, polled so that every wait has a deadline.
#pragma once

#include "mpi_group.h"
#include "testbed/communicator.h"

namespace testbed::mpi {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(double timeout_s, bool track_arrivals, AllReduceSettings all_reduce)
      : timeout_s_(timeout_s), track_arrivals_(track_arrivals), all_reduce_(all_reduce) {}

  // Initialises MPI if needed and returns this process's endpoint on a duplicate of
  // MPI_COMM_WORLD. Collective over all processes of the MPI world.
  [[nodiscard]] absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> Connect(int world_size) override;
  [[nodiscard]] MemorySpace memory_space() const noexcept override { return MemorySpace::kHost; }

 private:
  double timeout_s_;
  bool track_arrivals_;
  AllReduceSettings all_reduce_;
};

}  // namespace testbed::mpi
