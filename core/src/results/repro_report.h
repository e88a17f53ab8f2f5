// `testbed report results/*.h5`: one page saying which papers' figures the testbed
// reproduces and how closely. Per results file: its summary table (ours, the paper's figure,
// ours / paper) and a verdict by one rule:
//   reproduced — every figure the experiment compares with the paper is within the
//                tolerance (default 15%: 0.85 <= ours / paper <= 1.15);
//   partly     — some are within it, some are not;
//   not        — none is (or a run that should give one failed);
//   no figures — the experiment gives no paper figure to compare with.
// Markdown (default) or HTML; a figure (the file's main figure from `testbed plot`) may be
// embedded under each section.
#pragma once

#include <string>
#include <vector>

#include "results/report.h"

namespace testbed {

struct Verdict {
  enum class Kind { kReproduced, kPartly, kNot, kNoFigures };
  Kind kind = Kind::kNoFigures;
  int compared = 0;  // rows with a paper figure
  int within = 0;    // of them, within the tolerance
  int failed = 0;    // rows with a paper figure whose run failed
};
[[nodiscard]] const char* VerdictName(Verdict::Kind kind) noexcept;
[[nodiscard]] Verdict Judge(const std::vector<ReportRow>& rows, double tolerance);

struct ReportSection {
  ResultsHeader header;
  std::string file;
  std::vector<ReportRow> rows;
  Verdict verdict;
  std::string figure;  // path of an image to embed ("" for none)
};

[[nodiscard]] std::string ReportMarkdown(const std::vector<ReportSection>& sections, double tolerance);
[[nodiscard]] std::string ReportHtml(const std::vector<ReportSection>& sections, double tolerance);

}  // namespace testbed
