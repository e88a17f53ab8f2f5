#include "mpi_runtime.h"

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace testbed::mpi {
namespace {

std::mutex g_init_mu;

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

absl::Status EnsureMpiInitialized() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return absl::UnavailableError("mpi communicator: MPI has already been finalized in this process");
  if (initialized) return absl::OkStatus();
  int provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) return absl::UnavailableError("mpi communicator: MPI_Init_thread failed");
  // Registered from this library, so it runs when the plugin is unloaded or at exit,
  // whichever comes first; MPI cannot be restarted after that.
  std::atexit(FinalizeAtExit);
  return absl::OkStatus();
}

int MpiThreadLevel() noexcept {
  int level = MPI_THREAD_SINGLE;
  if (MpiUsable()) MPI_Query_thread(&level);
  return level;
}

bool MpiUsable() noexcept {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

absl::Status MpiError(int code, const std::string& call) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return absl::InternalError(absl::StrCat(call, ": ", std::string(text, static_cast<size_t>(length))));
}

}  // namespace testbed::mpi
