// `testbed plot results/x.h5 [-o DIR]`: the figures of a results file as PNG and SVG, drawn
// by tools/plot.py (installed as share/testbed/tools/plot.py) with matplotlib under the
// Python 3 interpreter named by --python (default: Debian's /usr/bin/python3, whose
// python3-matplotlib scripts/install-deps.sh installs, else python3 on the PATH). The
// results are read by the core's reader and handed over as DIR/plot_data.json.
#pragma once

#include <string>

namespace testbed::cli {

struct PlotArgs {
  std::string file;
  std::string out_dir;  // default: the results file's name without .h5, plus "_plots"
  std::string python;  // empty: /usr/bin/python3 when present, else python3 on the PATH
  bool quiet = false;  // the script's list of files to stderr instead of stdout
};

// Where tools/plot.py writes the main figure of experiment `experiment` in `dir`.
[[nodiscard]] std::string MainFigurePath(const std::string& dir, const std::string& experiment);

int Plot(const PlotArgs& args);

}  // namespace testbed::cli
