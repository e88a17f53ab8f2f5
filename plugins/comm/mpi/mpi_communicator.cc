#include "mpi_communicator.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "mpi_group.h"
#include "mpi_runtime.h"
#include "testbed/status_macros.h"

namespace testbed::mpi {

absl::StatusOr<std::vector<std::unique_ptr<CommGroup>>> MpiCommunicator::Connect(int world_size) {
  TESTBED_RETURN_IF_ERROR(EnsureMpiInitialized());
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (world_size != 0 && world_size != size) {
    return absl::InvalidArgumentError(absl::StrCat("mpi communicator: the job asks for ", world_size,
                                                   " ranks but MPI was started with ", size,
                                                   " processes (mpirun -np ", world_size, ")"));
  }
  std::vector<int> world(static_cast<size_t>(size));
  std::iota(world.begin(), world.end(), 0);
  TESTBED_ASSIGN_OR_RETURN(auto core, MpiGroup::MakeCore(MPI_COMM_WORLD, std::move(world), timeout_s_, track_arrivals_,
                                                         "mpi communicator: connect"));
  std::vector<std::unique_ptr<CommGroup>> endpoints;
  endpoints.push_back(std::make_unique<MpiGroup>(std::move(core), all_reduce_));
  return endpoints;
}

}  // namespace testbed::mpi
