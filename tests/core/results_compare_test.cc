// `testbed compare` (results/compare.h): two results files that differ in one metric of one
// run report exactly that; the tolerance decides what is flagged; runs in one file only,
// a changed status and a changed configuration are reported; the testbed's own timings are
// left out unless asked for.
#include "results/compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "results_fixtures.h"
#include "test_support.h"

namespace testbed {
namespace {

using ::testing::ElementsAre;

ResultsHeader Header() { return testing::MinimalHeader("exp", "sim", "iteration_time_s", {"a", "b"}, {"1", "2"}); }

StoredRun MakeRun(const std::string& arm, const std::string& point, double t) {
  StoredRun r;
  r.id = arm + "@" + point;
  r.arm = arm;
  r.point = point;
  r.status = "ok";
  r.backend = "sim";
  r.config_hash = "h-" + point;
  r.config_toml = "[train]\nmicro_batch = " + point + "\n";
  r.output.metrics.Add("iteration_time_s", t, "s", Better::kLower);
  r.output.metrics.Add("memory_peak_gib", 10 * t, "GiB", Better::kLower);
  r.output.metrics.Add("simulation_wall_s", 0.01 * t, "s", Better::kLower);
  return r;
}

ResultsFile::Contents Write(const std::filesystem::path& path, const std::vector<StoredRun>& runs) {
  auto f = ResultsFile::Open(path, Header());
  EXPECT_TRUE(f.ok()) << f.status();
  int index = 0;
  for (StoredRun r : runs) {
    r.index = index++;
    EXPECT_TRUE(f->Append(r).ok());
  }
  auto back = ResultsFile::Read(path, false);
  EXPECT_TRUE(back.ok()) << back.status();
  return *back;
}

class CompareTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(CompareTest, OneMetricOfOneRunIsExactlyWhatIsReported) {
  const auto old_file = Write(dir_ / "old.h5", {MakeRun("a", "1", 1.0), MakeRun("a", "2", 2.0), MakeRun("b", "1", 3.0)});
  std::vector<StoredRun> runs = {MakeRun("a", "1", 1.0), MakeRun("a", "2", 2.0), MakeRun("b", "1", 3.0)};
  runs[1].output.metrics.Add("memory_peak_gib", 21.0, "GiB", Better::kLower);  // was 20
  runs[2].output.metrics.Add("simulation_wall_s", 99.0, "s", Better::kLower);  // the tool's own time
  const auto new_file = Write(dir_ / "new.h5", runs);
  const Comparison c = CompareResults(old_file, new_file, CompareOptions{});
  EXPECT_EQ(c.compared_runs, 3);
  EXPECT_EQ(c.compared_metrics, 6);  // two per run: simulation_wall_s is left out
  ASSERT_EQ(c.metrics.size(), 1u);
  const MetricChange& m = c.metrics[0];
  EXPECT_EQ(m.run, "a@2");
  EXPECT_EQ(m.metric, "memory_peak_gib");
  EXPECT_DOUBLE_EQ(m.old_value, 20);
  EXPECT_DOUBLE_EQ(m.new_value, 21);
  EXPECT_DOUBLE_EQ(m.Absolute(), 1);
  EXPECT_DOUBLE_EQ(m.Relative(), 1.0 / 21);
  EXPECT_TRUE(m.flagged);
  EXPECT_TRUE(c.Differs());
  EXPECT_TRUE(c.runs.empty());
  // A tolerance above the move: listed, not flagged, and the files count as the same.
  CompareOptions loose;
  loose.tolerance = 0.05;
  const Comparison l = CompareResults(old_file, new_file, loose);
  ASSERT_EQ(l.metrics.size(), 1u);
  EXPECT_FALSE(l.metrics[0].flagged);
  EXPECT_FALSE(l.Differs());
  // With the tool's own timings.
  CompareOptions all;
  all.self_measured = true;
  EXPECT_EQ(CompareResults(old_file, new_file, all).metrics.size(), 2u);
  // A file against itself: nothing.
  const Comparison same = CompareResults(old_file, old_file, CompareOptions{});
  EXPECT_TRUE(same.metrics.empty());
  EXPECT_FALSE(same.Differs());
}

TEST_F(CompareTest, RunsInOneFileStatusAndConfigurationAreReported) {
  const auto old_file = Write(dir_ / "old.h5", {MakeRun("a", "1", 1.0), MakeRun("a", "2", 2.0)});
  std::vector<StoredRun> runs = {MakeRun("a", "1", 1.0), MakeRun("b", "2", 2.0)};
  runs[0].status = "failed";
  runs[0].config_hash = "other";
  runs[0].config_toml = "[train]\nmicro_batch = 4\n";
  runs[0].output.metrics.Add("bubble_fraction", 0.5, "1");
  const auto new_file = Write(dir_ / "new.h5", runs);
  const Comparison c = CompareResults(old_file, new_file, CompareOptions{});
  EXPECT_THAT(c.only_old, ElementsAre("a@2"));
  EXPECT_THAT(c.only_new, ElementsAre("b@2"));
  ASSERT_EQ(c.runs.size(), 1u);
  EXPECT_EQ(c.runs[0].old_status, "ok");
  EXPECT_EQ(c.runs[0].new_status, "failed");
  EXPECT_THAT(c.runs[0].removed_lines, ElementsAre("micro_batch = 1"));
  EXPECT_THAT(c.runs[0].added_lines, ElementsAre("micro_batch = 4"));
  ASSERT_EQ(c.metrics.size(), 1u);  // a metric only in the new file
  EXPECT_FALSE(c.metrics[0].in_old);
  EXPECT_TRUE(c.metrics[0].flagged);
  EXPECT_TRUE(c.Differs());
}

TEST(SelfMeasured, TheTestbedsOwnFiguresAreKnownByName) {
  for (const char* m : {"schedule_build_s", "simulation_wall_s", "planning_time_s", "load_balancer_time_s",
                        "partitioner_time_s", "measured_iteration_s", "balancer_search_s_per_call"}) {
    EXPECT_TRUE(SelfMeasured(m)) << m;
  }
  for (const char* m : {"iteration_time_s", "memory_peak_gib", "host_copy_time_s", "moe_layer_time_s"}) {
    EXPECT_FALSE(SelfMeasured(m)) << m;
  }
}

}  // namespace
}  // namespace testbed
