#include "cli/report_command.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/plot_command.h"
#include "results/repro_report.h"
#include "results/results_file.h"

namespace testbed::cli {

int Report(const ReportArgs& args) {
  std::vector<ReportSection> sections;
  for (const std::string& file : args.files) {
    auto contents = ResultsFile::Read(file, false);
    if (!contents.ok()) return Fail(contents.status());
    ReportSection s;
    s.header = contents->header;
    s.file = file;
    s.rows = SummariseSeeds(s.header, BuildReport(s.header, contents->runs));
    s.verdict = Judge(s.rows, args.tolerance);
    if (!args.figures.empty()) {
      PlotArgs plot;
      plot.file = file;
      plot.out_dir = (std::filesystem::path(args.figures) / s.header.experiment).string();
      plot.python = args.python;
      plot.quiet = true;
      if (const int rc = Plot(plot); rc != 0) return rc;
      s.figure = MainFigurePath(plot.out_dir, s.header.experiment);
    }
    sections.push_back(std::move(s));
  }
  const std::string text = args.html ? ReportHtml(sections, args.tolerance) : ReportMarkdown(sections, args.tolerance);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace testbed::cli
