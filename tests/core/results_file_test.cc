// The HDF5 results file: a full round trip of runs (attributes, params of every type,
// metrics with units, tables of every column type, notes), atomic replacement, and the
// refusals that leave a file byte-for-byte untouched (corrupt, not ours, another experiment,
// an unwritable place).
#include "results/results_file.h"

#include <H5Cpp.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace testbed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ResultsHeader Header(const std::string& experiment = "exp-a") {
  ResultsHeader h;
  h.experiment = experiment;
  h.paper = "Some paper (2023), Fig. 7";
  h.source_file = "experiments/x.toml";
  h.source_text = "[experiment]\nname = \"exp-a\"\n# ü unicode\n";
  h.sets = {"train.micro_batch=8", "arm.b.partitioner.stages=2"};
  h.backend = "plan";
  h.metric = "stage_balance";
  h.reference_metric = "speedup";
  h.arms = {"base", "new"};
  h.points = {"1,x", "2,x"};
  h.sweep_keys = {"train.micro_batch", "model.preset"};
  h.references = {{"new", "1,x", 1.5}, {"new", "", 2.25}};
  return h;
}

StoredRun FullRun() {
  StoredRun r;
  r.id = "new@1,x";
  r.index = 3;
  r.arm = "new";
  r.point = "1,x";
  r.status = "ok";
  r.seed = 0xFEDCBA9876543210ull;  // high bit set: stored unsigned (h5py reads it as written)
  r.backend = "plan";
  r.git_revision = "0123456789ab-dirty";
  r.start_time = "2026-01-02T03:04:05Z";
  r.wall_time_s = 1.25;
  r.config_hash = "00112233aabbccdd";
  r.config_toml = "[train]\nmicro_batch = 1\n";
  r.params = {
      {"train.micro_batch", std::int64_t{-7}},
      {"parallel.sequence_parallel", true},
      {"parallel.zero", false},
      {"device_model.efficiency", 0.625},
      {"partitioner", std::string("fixture.uniform — ü")},
      {"partitioner.sizes", std::vector<std::int64_t>{1, 2, 40000000000}},
      {"partitioner.weights", std::vector<double>{0.5, -1e300}},
      {"partitioner.names", std::vector<std::string>{"a", "", "long name with spaces"}},
      {"partitioner.empty_ints", std::vector<std::int64_t>{}},
      {"partitioner.empty_strings", std::vector<std::string>{}},
      {"partitioner.single", std::vector<double>{3.0}},
  };
  r.output.metrics.Add("iteration_time_s", 0.123, "s", Better::kLower);
  r.output.metrics.Add("throughput", 4567.0, "samples/s", Better::kHigher);
  r.output.metrics.Add("stage_balance", 1.0588, "1");
  Table per_device;
  per_device.name = "per_device";
  per_device.columns.push_back({"device", "", std::vector<std::int64_t>{0, 1, 2}});
  per_device.columns.push_back({"memory_peak_bytes", "B", std::vector<double>{1e9, 2e9, 3e9}});
  per_device.columns.push_back({"kind", "", std::vector<std::string>{"rtx3090", "a100", ""}});
  Table timeline;  // large enough to be chunked and compressed
  timeline.name = "timeline";
  std::vector<double> start(10000);
  std::vector<std::int64_t> task(10000);
  for (size_t i = 0; i < start.size(); ++i) {
    start[i] = static_cast<double>(i) * 0.5;
    task[i] = static_cast<std::int64_t>(i * i);
  }
  timeline.columns.push_back({"start_s", "s", start});
  timeline.columns.push_back({"task", "", task});
  Table empty;
  empty.name = "empty";
  empty.columns.push_back({"nothing", "s", std::vector<double>{}});
  r.output.tables = {per_device, timeline, empty};
  r.output.notes = {"first note", "second note"};
  return r;
}

std::map<std::string, ParamValue> AsMap(const std::vector<std::pair<std::string, ParamValue>>& v) {
  return {v.begin(), v.end()};
}

TEST(ResultsFileTest, RoundTripOfAFullRun) {
  testing::TempDir dir;
  const auto path = dir / "sub" / "dir" / "r.h5";  // directories are created
  auto file = ResultsFile::Open(path, Header());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->runs().empty());
  const StoredRun run = FullRun();
  ASSERT_TRUE(file->Append(run).ok());
  EXPECT_TRUE(std::filesystem::exists(path));

  auto c = ResultsFile::Read(path, /*with_tables=*/true);
  ASSERT_TRUE(c.ok()) << c.status();
  const ResultsHeader h = Header();
  EXPECT_EQ(c->header.experiment, h.experiment);
  EXPECT_EQ(c->header.paper, h.paper);
  EXPECT_EQ(c->header.source_file, h.source_file);
  EXPECT_EQ(c->header.source_text, h.source_text);
  EXPECT_EQ(c->header.sets, h.sets);
  EXPECT_EQ(c->header.backend, h.backend);
  EXPECT_EQ(c->header.metric, h.metric);
  EXPECT_EQ(c->header.reference_metric, h.reference_metric);
  EXPECT_EQ(c->header.arms, h.arms);
  EXPECT_EQ(c->header.points, h.points);
  EXPECT_EQ(c->header.sweep_keys, h.sweep_keys);
  ASSERT_EQ(c->header.references.size(), 2u);
  EXPECT_EQ(c->header.references[0].arm, "new");
  EXPECT_EQ(c->header.references[0].point, "1,x");
  EXPECT_EQ(c->header.references[0].value, 1.5);
  EXPECT_EQ(c->header.references[1].point, "");
  EXPECT_EQ(c->header.references[1].value, 2.25);

  ASSERT_EQ(c->runs.size(), 1u);
  const StoredRun& r = c->runs[0];
  EXPECT_EQ(r.id, run.id);
  EXPECT_EQ(r.index, run.index);
  EXPECT_EQ(r.arm, run.arm);
  EXPECT_EQ(r.point, run.point);
  EXPECT_EQ(r.status, run.status);
  EXPECT_EQ(r.error, run.error);
  EXPECT_EQ(r.seed, run.seed);
  EXPECT_EQ(r.backend, run.backend);
  EXPECT_EQ(r.git_revision, run.git_revision);
  EXPECT_EQ(r.start_time, run.start_time);
  EXPECT_EQ(r.wall_time_s, run.wall_time_s);
  EXPECT_EQ(r.config_hash, run.config_hash);
  EXPECT_EQ(r.config_toml, run.config_toml);

  // Every parameter, with its type.
  const auto want = AsMap(run.params), got = AsMap(r.params);
  EXPECT_EQ(r.params.size(), run.params.size());
  for (const auto& [name, value] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    EXPECT_EQ(it->second.index(), value.index()) << name << ": type " << ParamTypeName(TypeOf(it->second));
    EXPECT_TRUE(it->second == value) << name << ": " << FormatParamValue(it->second) << " vs "
                                     << FormatParamValue(value);
  }

  // Metrics with units and direction, in order.
  ASSERT_EQ(r.output.metrics.all().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const Metric& a = r.output.metrics.all()[i];
    const Metric& b = run.output.metrics.all()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.value, b.value);
    EXPECT_EQ(a.unit, b.unit);
    EXPECT_EQ(a.better, b.better) << a.name;
  }

  // Tables: every column with its type, unit and values, in the written order.
  ASSERT_EQ(r.output.tables.size(), 3u);
  for (const Table& want_t : run.output.tables) {
    const Table* t = nullptr;
    for (const Table& x : r.output.tables) {
      if (x.name == want_t.name) t = &x;
    }
    ASSERT_NE(t, nullptr) << want_t.name;
    ASSERT_EQ(t->columns.size(), want_t.columns.size()) << want_t.name;
    for (size_t i = 0; i < t->columns.size(); ++i) {
      EXPECT_EQ(t->columns[i].name, want_t.columns[i].name);
      EXPECT_EQ(t->columns[i].unit, want_t.columns[i].unit);
      EXPECT_TRUE(t->columns[i].values == want_t.columns[i].values) << want_t.name << "." << t->columns[i].name;
    }
  }
  EXPECT_THAT(r.output.notes, ElementsAre("first note", "second note"));

  // Without tables, the same run and no table.
  auto light = ResultsFile::Read(path, false);
  ASSERT_TRUE(light.ok());
  EXPECT_TRUE(light->runs[0].output.tables.empty());
  EXPECT_EQ(light->runs[0].output.metrics.all().size(), 3u);
}

TEST(ResultsFileTest, FailedRunsAndReplacementAndOrder) {
  testing::TempDir dir;
  const auto path = dir / "r.h5";
  auto file = ResultsFile::Open(path, Header());
  ASSERT_TRUE(file.ok());
  StoredRun failed;
  failed.id = "base@2,x";
  failed.index = 2;
  failed.arm = "base";
  failed.point = "2,x";
  failed.status = "failed";
  failed.error = "partitioner 'p': no plan fits\nsecond line";
  ASSERT_TRUE(file->Append(failed).ok());
  StoredRun first = failed;
  first.id = "base@1,x";
  first.index = 0;
  first.status = "ok";
  first.error = "";
  first.output.metrics.Add("stage_balance", 1.5, "1", Better::kLower);
  ASSERT_TRUE(file->Append(first).ok());
  ASSERT_EQ(file->runs().size(), 2u);
  ASSERT_NE(file->Find("base@2,x"), nullptr);
  EXPECT_EQ(file->Find("base@2,x")->status, "failed");
  EXPECT_EQ(file->Find("nope"), nullptr);

  // Reading sorts by index; the failed run keeps its error.
  auto c = ResultsFile::Read(path, false);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->runs.size(), 2u);
  EXPECT_EQ(c->runs[0].id, "base@1,x");
  EXPECT_EQ(c->runs[1].status, "failed");
  EXPECT_EQ(c->runs[1].error, failed.error);
  EXPECT_TRUE(c->runs[1].output.metrics.empty());

  // Appending the same id replaces the run (a rerun of a failed one).
  StoredRun fixed = failed;
  fixed.status = "ok";
  fixed.error = "";
  fixed.output.metrics.Add("stage_balance", 1.25, "1", Better::kLower);
  ASSERT_TRUE(file->Append(fixed).ok());
  EXPECT_EQ(file->runs().size(), 2u);
  auto again = ResultsFile::Read(path, false);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->runs.size(), 2u);
  EXPECT_EQ(again->runs[1].status, "ok");
  EXPECT_EQ(again->runs[1].output.metrics.Find("stage_balance")->value, 1.25);

  // Reopening finds the completed runs (what resuming relies on).
  auto reopened = ResultsFile::Open(path, Header());
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(reopened->runs().size(), 2u);
  ASSERT_NE(reopened->Find("base@1,x"), nullptr);
  EXPECT_EQ(reopened->Find("base@1,x")->output.metrics.Find("stage_balance")->value, 1.5);
  // No temporary file is left behind (the writers' lock file stays, by design).
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    if (e.path().filename() != "r.h5.lock") ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(ResultsFileTest, CorruptFileIsRefusedAndLeftUntouched) {
  testing::TempDir dir;
  const auto path = dir / "r.h5";
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 7919 + 13) % 256);
  testing::WriteFile(path, garbage);
  const auto mtime = std::filesystem::last_write_time(path);

  auto opened = ResultsFile::Open(path, Header());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
  const std::string msg(opened.status().message());
  EXPECT_THAT(msg, HasSubstr(path.string()));
  EXPECT_THAT(msg, HasSubstr("not a readable HDF5 file"));
  EXPECT_THAT(msg, HasSubstr("left untouched"));
  auto read = ResultsFile::Read(path, false);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);

  EXPECT_EQ(testing::ReadFile(path), garbage);
  EXPECT_EQ(std::filesystem::last_write_time(path), mtime);
}

TEST(ResultsFileTest, HdfFileOfSomethingElseIsRefusedAndLeftUntouched) {
  testing::TempDir dir;
  const auto path = dir / "other.h5";
  {
    H5::H5File f(path.string(), H5F_ACC_TRUNC);
    f.createGroup("unrelated");
  }
  const std::string before = testing::ReadFile(path);
  auto opened = ResultsFile::Open(path, Header());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr("not a testbed results file"));
  EXPECT_EQ(testing::ReadFile(path), before);
}

TEST(ResultsFileTest, FileOfAnotherExperimentIsRefusedAndLeftUntouched) {
  testing::TempDir dir;
  const auto path = dir / "r.h5";
  {
    auto a = ResultsFile::Open(path, Header("exp-a"));
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(a->Append(FullRun()).ok());
  }
  const std::string before = testing::ReadFile(path);
  auto b = ResultsFile::Open(path, Header("exp-b"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(b.status().message());
  EXPECT_THAT(msg, HasSubstr("holds results of experiment 'exp-a', not 'exp-b'"));
  EXPECT_EQ(testing::ReadFile(path), before);
}

TEST(ResultsFileTest, UnwritableLocationIsRefusedAtOpen) {
  // Under /dev/null nothing can be created, even by root.
  auto opened = ResultsFile::Open("/dev/null/results/r.h5", Header());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr("/dev/null/results/r.h5"));
}

TEST(ResultsFileTest, MissingFileCannotBeRead) {
  testing::TempDir dir;
  auto read = ResultsFile::Read(dir / "none.h5", false);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace testbed

namespace testbed {
namespace {

// The seed is an unsigned attribute (h5py reads the number that was written); a file that
// stored its bits signed, as earlier versions did, still reads back the same seed.
TEST(ResultsFileTest, SeedIsStoredUnsignedAndOldSignedSeedsStillRead) {
  testing::TempDir dir;
  const auto path = dir / "r.h5";
  {
    auto f = ResultsFile::Open(path, Header());
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Append(FullRun()).ok());
  }
  std::string bytes = testing::ReadFile(path);
  bytes.resize(bytes.size() - 32);  // drop the seal: the file is changed below by HDF5 itself
  testing::WriteFile(path, bytes);
  {
    H5::H5File f(path.string(), H5F_ACC_RDWR);
    H5::Group g = f.openGroup("runs").openGroup(FullRun().id);
    H5::Attribute a = g.openAttribute("seed");
    EXPECT_EQ(a.getIntType().getSign(), H5T_SGN_NONE);
    g.removeAttr("seed");
    const std::int64_t old = static_cast<std::int64_t>(FullRun().seed);
    g.createAttribute("seed", H5::PredType::NATIVE_INT64, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_INT64, &old);
  }
  auto c = ResultsFile::Read(path, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->runs[0].seed, FullRun().seed);
}

}  // namespace
}  // namespace testbed
