// The summary table: rows in (point, arm) order, speedup over the first arm at the same
// point (respecting whether higher or lower is better), the paper's figure (an exact point
// beats an arm-wide one) and ours / paper; the CSV form.
#include "results/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

StoredRun MakeRun(const std::string& arm, const std::string& point, int index, double value, Better better,
              const std::string& status = "ok") {
  StoredRun r;
  r.id = point.empty() ? arm : arm + "@" + point;
  r.arm = arm;
  r.point = point;
  r.index = index;
  r.status = status;
  if (status == "ok") {
    r.output.metrics.Add("iteration_time_s", value, "s", better);
    r.output.metrics.Add("throughput", 100.0 / value, "samples/s", Better::kHigher);
  } else {
    r.error = "it broke";
  }
  return r;
}

ResultsHeader Header() {
  ResultsHeader h;
  h.experiment = "exp";
  h.paper = "Paper, Fig. 1";
  h.metric = "iteration_time_s";
  h.arms = {"base", "fast", "slow"};
  h.points = {"p1", "p2"};
  h.sweep_keys = {"model.preset"};
  return h;
}

TEST(ReportTest, SpeedupOverTheFirstArmForLowerIsBetter) {
  ResultsHeader h = Header();
  // Given out of order on purpose.
  std::vector<StoredRun> runs = {MakeRun("slow", "p1", 2, 4.0, Better::kLower), MakeRun("fast", "p2", 4, 1.0, Better::kLower),
                                 MakeRun("base", "p1", 0, 2.0, Better::kLower), MakeRun("fast", "p1", 1, 0.5, Better::kLower),
                                 MakeRun("base", "p2", 3, 3.0, Better::kLower)};
  auto rows = BuildReport(h, runs);
  ASSERT_EQ(rows.size(), 5u);
  std::vector<std::string> order;
  for (const auto& r : rows) order.push_back(r.run);
  EXPECT_EQ(order, (std::vector<std::string>{"base@p1", "fast@p1", "slow@p1", "base@p2", "fast@p2"}));
  EXPECT_EQ(rows[0].speedup, 1.0);
  EXPECT_EQ(rows[1].speedup, 4.0);   // 2.0 s / 0.5 s
  EXPECT_EQ(rows[2].speedup, 0.5);   // 2.0 s / 4.0 s
  EXPECT_EQ(rows[4].speedup, 3.0);   // 3.0 s / 1.0 s, against p2's own baseline
  EXPECT_EQ(rows[1].value, 0.5);
  EXPECT_EQ(rows[1].unit, "s");
  EXPECT_EQ(rows[1].metric, "iteration_time_s");
  EXPECT_FALSE(rows[1].reference.has_value());
  EXPECT_FALSE(rows[1].ratio.has_value());
}

TEST(ReportTest, SpeedupForHigherIsBetter) {
  ResultsHeader h = Header();
  h.metric = "throughput";
  auto rows = BuildReport(h, {MakeRun("base", "p1", 0, 2.0, Better::kLower), MakeRun("fast", "p1", 1, 0.5, Better::kLower)});
  ASSERT_EQ(rows.size(), 2u);
  // throughput 50 vs 200 samples/s: 200 / 50.
  EXPECT_EQ(rows[1].value, 200.0);
  EXPECT_EQ(rows[1].speedup, 4.0);
}

TEST(ReportTest, NoSpeedupForAMetricWithoutDirectionOrAFailedBaseline) {
  ResultsHeader h = Header();
  auto rows = BuildReport(h, {MakeRun("base", "p1", 0, 2.0, Better::kNeither), MakeRun("fast", "p1", 1, 1.0, Better::kNeither)});
  EXPECT_FALSE(rows[1].speedup.has_value());
  auto failed = BuildReport(h, {MakeRun("base", "p1", 0, 0, Better::kLower, "failed"), MakeRun("fast", "p1", 1, 1.0, Better::kLower)});
  EXPECT_FALSE(failed[0].value.has_value());
  EXPECT_EQ(failed[0].status, "failed");
  EXPECT_EQ(failed[0].error, "it broke");
  EXPECT_EQ(failed[1].value, 1.0);
  EXPECT_FALSE(failed[1].speedup.has_value());
}

TEST(ReportTest, ReferencesAndRatio) {
  ResultsHeader h = Header();
  // The arm-wide figure is listed after the exact one and before it: the exact one wins.
  h.references = {{"fast", "", 2.0}, {"fast", "p1", 5.0}, {"slow", "p1", 0.25}};
  auto rows = BuildReport(h, {MakeRun("base", "p1", 0, 2.0, Better::kLower), MakeRun("fast", "p1", 1, 0.5, Better::kLower),
                              MakeRun("slow", "p1", 2, 4.0, Better::kLower), MakeRun("base", "p2", 3, 3.0, Better::kLower),
                              MakeRun("fast", "p2", 4, 1.0, Better::kLower)});
  EXPECT_EQ(rows[1].reference, 5.0);
  EXPECT_EQ(rows[1].ratio, 4.0 / 5.0);
  EXPECT_EQ(rows[2].reference, 0.25);
  EXPECT_EQ(rows[2].ratio, 0.5 / 0.25);
  EXPECT_EQ(rows[4].reference, 2.0);  // arm-wide figure at p2
  EXPECT_EQ(rows[4].ratio, 3.0 / 2.0);
  EXPECT_FALSE(rows[0].reference.has_value());

  h.references = {{"fast", "p1", 5.0}, {"fast", "", 2.0}};
  auto rows2 = BuildReport(h, {MakeRun("base", "p1", 0, 2.0, Better::kLower), MakeRun("fast", "p1", 1, 0.5, Better::kLower)});
  EXPECT_EQ(rows2[1].reference, 5.0);
}

TEST(ReportTest, ReferenceAgainstANamedMetric) {
  ResultsHeader h = Header();
  h.reference_metric = "throughput";
  h.references = {{"fast", "p1", 160.0}};
  auto rows = BuildReport(h, {MakeRun("base", "p1", 0, 2.0, Better::kLower), MakeRun("fast", "p1", 1, 0.5, Better::kLower)});
  EXPECT_EQ(rows[1].reference, 160.0);
  EXPECT_EQ(rows[1].ratio, 200.0 / 160.0);
}

TEST(ReportTest, CsvHasTheExactHeaderAndQuotes) {
  ResultsHeader h = Header();
  h.points = {"1,x"};
  h.references = {{"fast", "1,x", 8.0}};
  auto rows = BuildReport(h, {MakeRun("base", "1,x", 0, 2.0, Better::kLower), MakeRun("fast", "1,x", 1, 0.5, Better::kLower),
                              MakeRun("slow", "1,x", 2, 0, Better::kLower, "failed")});
  const std::string csv = FormatReportCsv(rows);
  std::vector<std::string> lines = absl::StrSplit(csv, '\n');
  ASSERT_EQ(lines.size(), 5u);  // header, 3 rows, and the empty string after the last newline
  EXPECT_EQ(lines[0], "run,arm,point,metric,value,unit,speedup,reference,ratio");
  EXPECT_EQ(lines[1], "\"base@1,x\",base,\"1,x\",iteration_time_s,2,s,1,,");
  EXPECT_EQ(lines[2], "\"fast@1,x\",fast,\"1,x\",iteration_time_s,0.5,s,4,8,0.5");
  EXPECT_EQ(lines[3], "\"slow@1,x\",slow,\"1,x\",iteration_time_s,,,,,");
  EXPECT_EQ(lines[4], "");
}

TEST(ReportTest, TextTableListsFailures) {
  ResultsHeader h = Header();
  auto rows = BuildReport(h, {MakeRun("base", "p1", 0, 2.0, Better::kLower), MakeRun("fast", "p1", 1, 0, Better::kLower, "failed")});
  const std::string text = FormatReport(h, rows);
  EXPECT_THAT(text, HasSubstr("exp  (Paper, Fig. 1)"));
  EXPECT_THAT(text, HasSubstr("iteration_time_s [s]"));
  EXPECT_THAT(text, HasSubstr("model.preset"));
  EXPECT_THAT(text, HasSubstr("1.000x"));
  EXPECT_THAT(text, HasSubstr("failed fast@p1: it broke"));
}

TEST(ReportTest, SeedsAreSummarisedAsMeanAndStandardDeviation) {
  ResultsHeader h = Header();
  h.arms = {"base", "fast"};
  h.sweep_keys = {"point", kSeedSweepKey};
  h.points = {"p1,1", "p1,2", "p1,3"};
  // base: 2, 4, 3 s; fast: 1, 1, 2 s (speedups 2, 4, 1.5); one more fast run failed.
  std::vector<StoredRun> runs = {
      MakeRun("base", "p1,1", 0, 2.0, Better::kLower), MakeRun("fast", "p1,1", 1, 1.0, Better::kLower),
      MakeRun("base", "p1,2", 2, 4.0, Better::kLower), MakeRun("fast", "p1,2", 3, 1.0, Better::kLower),
      MakeRun("base", "p1,3", 4, 3.0, Better::kLower), MakeRun("fast", "p1,3", 5, 2.0, Better::kLower),
      MakeRun("fast", "p1,4", 6, 0.0, Better::kLower, "failed")};
  const auto rows = SummariseSeeds(h, BuildReport(h, runs));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].arm, "base");
  EXPECT_EQ(rows[0].point, "p1");
  EXPECT_EQ(rows[0].samples, 3);
  EXPECT_DOUBLE_EQ(*rows[0].value, 3.0);
  EXPECT_DOUBLE_EQ(*rows[0].stddev, 1.0);  // sqrt(((2-3)^2 + (4-3)^2 + 0) / 2)
  EXPECT_DOUBLE_EQ(*rows[1].value, 4.0 / 3);
  EXPECT_DOUBLE_EQ(*rows[1].speedup, (2.0 + 4.0 + 1.5) / 3);  // paired with each seed's baseline
  EXPECT_EQ(rows[2].status, "failed");  // not averaged in
  const std::string text = FormatReport(h, BuildReport(h, runs));
  EXPECT_THAT(text, HasSubstr("3 ± 1 (3)"));
  EXPECT_THAT(text, HasSubstr("mean ± sample standard deviation over seeds"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("experiment.seed")));
  // Extra columns: another metric beside the main one, averaged over the seeds.
  h.columns = {"throughput"};
  const auto with_columns = SummariseSeeds(h, BuildReport(h, runs));
  ASSERT_EQ(with_columns[0].columns.size(), 1u);
  EXPECT_DOUBLE_EQ(*with_columns[0].columns[0], (50.0 + 25.0 + 100.0 / 3) / 3);
  EXPECT_THAT(FormatReport(h, BuildReport(h, runs)), HasSubstr("throughput"));
  h.columns.clear();
  // Without a seed sweep the rows stay as they are.
  h.sweep_keys = {"point", "model.preset"};
  EXPECT_EQ(SummariseSeeds(h, BuildReport(h, runs)).size(), runs.size());
}

}  // namespace
}  // namespace testbed
