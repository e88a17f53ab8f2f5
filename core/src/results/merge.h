// Joins results files of one experiment (`testbed merge parts/*.h5 -o x.h5`): the parts of a
// sweep run with `--shard K/N` (a Slurm job array), or files run on different machines.
// Refused, with nothing written: a file that is not a results file; files of different
// experiments or of the same experiment configured differently (its source text or --set
// values); a run present in two files with different configurations. A run in two files with
// the same configuration is kept once (a completed one before a failed one).
#pragma once

#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"

namespace testbed {

struct MergeSummary {
  int files = 0;
  int runs = 0;        // runs written
  int duplicates = 0;  // runs found in more than one file (kept once)
};

[[nodiscard]] absl::StatusOr<MergeSummary> MergeResults(const std::vector<std::filesystem::path>& inputs,
                                                        const std::filesystem::path& output);

}  // namespace testbed
