// The HDF5 results file (DESIGN.md §6). Layout:
//   /                      attrs: format, testbed_version, experiment, paper, source_file,
//                          backend, metric, reference_metric, created
//   /experiment_toml       the experiment file as given (string), attr `sets`
//   /arms, /points         the table order (string arrays)
//   /references            compound (arm, point, value)
//   /runs/<id>/            attrs: index, arm, point, status, error, seed, backend,
//                          git_revision, start_time, wall_time_s, config_hash, config_toml
//   /runs/<id>/params      one attribute per resolved parameter
//   /runs/<id>/metrics     compound (name, value, unit, better)
//   /runs/<id>/<table>/    one dataset per column (attr `unit`): per_device, per_link,
//                          timeline, loss_curve, ...
// Every write goes to a temporary copy that is renamed over the file, so a crash or kill
// at any moment leaves either the previous file or the new one, both complete. Writers take
// turns under an advisory lock on `<file>.lock`, each starting from the file as the previous
// one left it, so processes sharing a file lose none of each other's runs. Every write ends
// with a seal (file_seal.h) checked before the HDF5 library reads the file; an unsealed file
// is read in a child process, which hands over a fresh sealed copy, so no corrupt file can
// crash the reader. Replacing a run
// writes the file afresh, so its size stays that of its live runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/metrics.h"
#include "testbed/param_spec.h"

namespace testbed {

struct StoredReference {
  std::string arm;
  std::string point;
  double value = 0;
};

struct ResultsHeader {
  std::string experiment;
  std::string paper;
  std::string source_file;
  std::string source_text;
  std::vector<std::string> sets;
  std::string backend;
  std::string metric;
  std::string reference_metric = "speedup";
  std::vector<std::string> arms;
  std::vector<std::string> points;
  std::vector<std::string> sweep_keys;
  std::vector<StoredReference> references;
  std::vector<std::string> columns;  // more metrics the table shows beside `metric`
};

struct StoredRun {
  std::string id;
  int index = 0;
  std::string arm;
  std::string point;
  std::string status;  // "ok" | "failed"
  std::string error;
  std::uint64_t seed = 0;
  std::string backend;
  std::string git_revision;
  std::string start_time;  // ISO 8601, UTC
  double wall_time_s = 0;
  std::string config_hash;
  std::string config_toml;
  std::vector<std::pair<std::string, ParamValue>> params;
  RunOutput output;
};

class ResultsFile {
 public:
  // Opens `path` for an experiment: a missing file is created (directories too); an
  // existing one is read so that its completed runs can be skipped. Errors, with nothing
  // changed on disk: the location is not writable; the file is not HDF5 or not a testbed
  // results file; it holds another experiment.
  [[nodiscard]] static absl::StatusOr<ResultsFile> Open(const std::filesystem::path& path, const ResultsHeader& header);

  // Reads a results file (for `testbed show` / `trace`). Tables are read only when asked.
  struct Contents {
    ResultsHeader header;
    std::vector<StoredRun> runs;  // by index
  };
  [[nodiscard]] static absl::StatusOr<Contents> Read(const std::filesystem::path& path, bool with_tables);

  // Moves `path` aside to a backup name no other file has (`<path>.<unix time>.bak`, then
  // `<path>.<unix time>-2.bak`, ...) without ever replacing one; returns that name.
  [[nodiscard]] static absl::StatusOr<std::string> MoveAside(const std::filesystem::path& path);

  // Rewrites a results file with its runs and nothing else (appending never leaves dead
  // space, but files written by earlier versions may hold some), under the writers' lock.
  struct Compaction {
    std::int64_t bytes_before = 0;
    std::int64_t bytes_after = 0;
    int runs = 0;
  };
  [[nodiscard]] static absl::StatusOr<Compaction> Compact(const std::filesystem::path& path);

  // Whether a write failed so that the HDF5 library holds a file it could not close (disk
  // full, file-size limit). The library's own clean-up at exit then crashes: a program should
  // end without it (std::_Exit after flushing its output), as `testbed` does.
  [[nodiscard]] static bool AbandonedAFile() noexcept;

  // A completed run already in the file, if any.
  [[nodiscard]] const StoredRun* Find(const std::string& id) const;
  [[nodiscard]] const std::vector<StoredRun>& runs() const noexcept { return runs_; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

  // Adds (or replaces) a run; the file on disk is updated atomically before this returns.
  absl::Status Append(const StoredRun& run);

 private:
  std::filesystem::path path_;
  ResultsHeader header_;
  std::vector<StoredRun> runs_;  // headers of runs in the file (tables not kept in memory)
};

}  // namespace testbed
