// `testbed merge parts/*.h5 -o x.h5`: joins results files of one experiment (results/merge.h),
// e.g. the parts of a sweep spread over a Slurm job array with `testbed run --shard K/N`.
#pragma once

#include <string>
#include <vector>

namespace testbed::cli {

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string output;
};

int Merge(const MergeArgs& args);

}  // namespace testbed::cli
