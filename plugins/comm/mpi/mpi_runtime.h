// Starting and stopping the MPI library on behalf of the testbed. The mpi communicator
// initialises MPI on first use unless the program already did; in that case it also
// finalises it when the process exits (or the plugin is unloaded), since nothing else in
// the testbed knows about MPI.
#pragma once

#include <string>

#include <mpi.h>

#include "absl/status/status.h"

namespace testbed::mpi {

// Initialises MPI (asking for MPI_THREAD_MULTIPLE) unless it already is. Unavailable when MPI
// was finalised already or cannot start.
[[nodiscard]] absl::Status EnsureMpiInitialized();
// The thread support level MPI runs with.
[[nodiscard]] int MpiThreadLevel() noexcept;
// True while MPI calls are allowed (initialised and not finalised).
[[nodiscard]] bool MpiUsable() noexcept;
// "MPI_Iallreduce: MPI_ERR_TRUNCATE: message truncated" for a failed call.
[[nodiscard]] absl::Status MpiError(int code, const std::string& call);

}  // namespace testbed::mpi
