// How the processes of one `mpirun` job share an experiment's simulated (or planned) runs: a
// small claims file beside the results file, `<output>.claims-<job>`, holding the next run
// to take and how many processes are done, updated under flock(2). Each process takes the
// next run when it is free (dynamic balance: a long run does not hold up the others), runs
// it and appends it to the results file itself (whose writers take turns under its own lock);
// the first process waits for every process to be done, then prints the table. A process
// that dies leaves its run in progress out of the file: the job ends (mpirun stops every
// process), and the same command reruns what is missing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace testbed {

class RunClaims {
 public:
  // The launcher's job id shared by every process of the job (PMIx's namespace, which
  // OpenMPI sets), or "" outside a job that has one.
  [[nodiscard]] static std::string JobId();

  // The first process: creates the file (atomically, counting from run 0). The others: wait
  // up to `wait_s` for it, then use it.
  [[nodiscard]] static absl::StatusOr<RunClaims> Create(const std::filesystem::path& output, const std::string& job);
  [[nodiscard]] static absl::StatusOr<RunClaims> Join(const std::filesystem::path& output, const std::string& job,
                                                      double wait_s);

  // The index of the next run to take (each index is handed out once in the job).
  [[nodiscard]] absl::StatusOr<std::int64_t> Next() const;
  // This process has no more runs to take; it skipped `skipped` of those it took (done before).
  [[nodiscard]] absl::Status Done(int skipped) const;
  // How many processes have said Done, and the runs they skipped together.
  struct Tally {
    int done = 0;
    int skipped = 0;
  };
  [[nodiscard]] absl::StatusOr<Tally> Count() const;
  // Removes the file (the first process, once every process is done).
  void Remove() const;

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  explicit RunClaims(std::filesystem::path p) : path_(std::move(p)) {}
  // Under the lock: reads "next done skipped", lets `update` change them, writes them back.
  template <typename F>
  absl::Status Update(F update) const;

  std::filesystem::path path_;
};

}  // namespace testbed
