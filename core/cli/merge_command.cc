#include "cli/merge_command.h"

#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "results/merge.h"

namespace testbed::cli {

int Merge(const MergeArgs& args) {
  std::vector<std::filesystem::path> inputs(args.inputs.begin(), args.inputs.end());
  auto summary = MergeResults(inputs, args.output);
  if (!summary.ok()) return Fail(summary.status());
  std::printf("%d runs from %d files into %s (%d found in more than one file, kept once)\n", summary->runs,
              summary->files, args.output.c_str(), summary->duplicates);
  return 0;
}

}  // namespace testbed::cli
