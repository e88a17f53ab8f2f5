// `testbed report`'s verdict rule (results/repro_report.h) on hand-made results files: the
// paper's figures within 15% -> reproduced, some -> partly, none (or failed) -> not, none
// given -> no figures; and the Markdown and HTML pages carry the table and the verdict.
#include "results/repro_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "results_fixtures.h"
#include "test_support.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

StoredRun Run(const std::string& arm, const std::string& point, double throughput, const std::string& status = "ok") {
  StoredRun r;
  r.id = arm + "@" + point;
  r.arm = arm;
  r.point = point;
  r.status = status;
  r.backend = "sim";
  if (status == "ok") r.output.metrics.Add("throughput", throughput, "samples/s", Better::kHigher);
  return r;
}

// A file whose "fast" arm is `speedups` times the baseline at points p0, p1, ..., each point's
// paper speedup `paper`.
std::vector<ReportRow> Rows(const std::vector<double>& speedups, double paper, bool failed_last = false,
                            bool references = true) {
  std::vector<std::string> points;
  for (size_t i = 0; i < speedups.size(); ++i) points.push_back("p" + std::to_string(i));
  ResultsHeader h = testing::MinimalHeader("exp", "sim", "throughput", {"base", "fast"}, points);
  std::vector<StoredRun> runs;
  for (size_t i = 0; i < speedups.size(); ++i) {
    runs.push_back(Run("base", points[i], 10.0));
    const bool fail = failed_last && i + 1 == speedups.size();
    runs.push_back(Run("fast", points[i], 10.0 * speedups[i], fail ? "failed" : "ok"));
    if (references) h.references.push_back({"fast", points[i], paper});
  }
  return BuildReport(h, runs);
}

TEST(ReproReport, VerdictFollowsTheFifteenPercentRule) {
  // Paper 1.5x: ours 1.6x (1.07), 1.3x (0.87), 1.74x (1.16: just outside).
  Verdict all = Judge(Rows({1.6, 1.3}, 1.5), 0.15);
  EXPECT_EQ(all.kind, Verdict::Kind::kReproduced);
  EXPECT_EQ(all.compared, 2);
  EXPECT_EQ(all.within, 2);
  Verdict some = Judge(Rows({1.6, 1.74}, 1.5), 0.15);
  EXPECT_EQ(some.kind, Verdict::Kind::kPartly);
  EXPECT_EQ(some.within, 1);
  Verdict none = Judge(Rows({1.0, 2.0}, 1.5), 0.15);
  EXPECT_EQ(none.kind, Verdict::Kind::kNot);
  EXPECT_EQ(none.within, 0);
  // A failed run with a paper figure counts as not within.
  Verdict failed = Judge(Rows({1.5, 1.5}, 1.5, true), 0.15);
  EXPECT_EQ(failed.kind, Verdict::Kind::kPartly);
  EXPECT_EQ(failed.failed, 1);
  EXPECT_EQ(Judge(Rows({1.5}, 1.5, false, false), 0.15).kind, Verdict::Kind::kNoFigures);
  // The tolerance is the rule's parameter.
  EXPECT_EQ(Judge(Rows({1.6, 1.74}, 1.5), 0.2).kind, Verdict::Kind::kReproduced);
}

TEST(ReproReport, PagesCarryTheTableAndTheVerdict) {
  ReportSection s;
  s.header = testing::MinimalHeader("exp<1>", "sim", "throughput", {"base", "fast"}, {"p0", "p1"});
  s.header.paper = "A | B";
  s.file = "results/exp.h5";
  s.rows = Rows({1.6, 1.74}, 1.5);
  s.verdict = Judge(s.rows, 0.15);
  s.figure = "figs/exp/exp_main.png";
  const std::string md = ReportMarkdown({s}, 0.15);
  EXPECT_THAT(md, HasSubstr("| exp<1> | A \\| B | partly | 1 of 2 figures within 15% |"));
  EXPECT_THAT(md, HasSubstr("| fast | p1 | 17.4 | 1.740 | 1.5 | 1.16 | ok |"));
  EXPECT_THAT(md, HasSubstr("![exp<1>](figs/exp/exp_main.png)"));
  const std::string html = ReportHtml({s}, 0.15);
  EXPECT_THAT(html, HasSubstr("<td>exp&lt;1&gt;</td>"));
  EXPECT_THAT(html, HasSubstr("class=\"partly\">partly</td>"));
  EXPECT_THAT(html, HasSubstr("<img src=\"figs/exp/exp_main.png\""));
}

}  // namespace
}  // namespace testbed
