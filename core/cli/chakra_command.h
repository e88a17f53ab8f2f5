// `testbed import-chakra` and `testbed export-chakra`: Chakra execution traces in and out.
#pragma once

#include <string>

#include "cli/commands.h"

namespace testbed::cli {

struct ImportChakraArgs {
  std::string traces;      // prefix or directory of <prefix>.<rank>.et files, or an ASTRA-sim text workload
  bool astra_text = false;  // `traces` is a text workload
  int ranks = 0;           // text workload: NPUs
  std::string output;      // an experiment file to write that simulates the traces ("" : only check them)
  std::string cluster;     // cluster preset of that experiment
};
// Reads and imports the traces, prints what they hold (ranks, nodes, tasks by kind, what is
// not modelled) and, with an output, writes an experiment that simulates them.
int ImportChakra(Env& env, const ImportChakraArgs& args);

struct ExportChakraArgs {
  std::string results;
  std::string run;
  std::string output;  // directory; the traces are <output>/<run>.<rank>.et
};
// Rebuilds the schedule of a simulated run from its stored configuration and writes it as
// Chakra traces with its modelled durations.
int ExportChakra(Env& env, const ExportChakraArgs& args);

}  // namespace testbed::cli
