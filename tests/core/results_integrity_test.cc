// What a results file guarantees beyond one writer: bytes of a sealed file changed in turn
// (3,000 spread over it, and every byte of the seal) are refused with a clear error and never crashes the reader; an unsealed (older or
// damaged-seal) file with random bytes changed is read in a child first, so no change crashes
// this process; four processes writing one file at once keep every one of their runs;
// backups of --fresh never replace one another; temporaries of dead writers are removed;
// replaced runs leave no dead space, and compaction removes what older versions left.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include <H5Cpp.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "results/file_seal.h"
#include "results/results_file.h"
#include "results_fixtures.h"
#include "test_support.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;

ResultsHeader Header() { return testing::MinimalHeader("integrity", "plan", "stage_balance", {"a"}, {"p"}); }

StoredRun MakeRun(const std::string& id, int index) {
  StoredRun r;
  r.id = id;
  r.index = index;
  r.arm = "a";
  r.point = "p";
  r.status = "ok";
  r.seed = 42;
  r.backend = "plan";
  r.start_time = "2026-01-02T03:04:05Z";
  r.params = {{"train.micro_batch", std::int64_t{4}}, {"partitioner", std::string("fixture.uniform")}};
  r.output.metrics.Add("stage_balance", 1.0 + index, "1", Better::kLower);
  Table t;
  t.name = "per_device";
  t.columns.push_back(Column{"device", "", std::vector<std::int64_t>{0, 1, 2, 3}});
  t.columns.push_back(Column{"busy_s", "s", std::vector<double>{0.5, 0.25, 0.125, 1.0}});
  r.output.tables.push_back(t);
  r.output.notes = {"a note"};
  return r;
}

std::string SmallFile(const testing::TempDir& dir) {
  const auto path = dir / "r.h5";
  auto f = ResultsFile::Open(path, Header());
  EXPECT_TRUE(f.ok()) << f.status();
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(f->Append(MakeRun(absl::StrCat("a@p", i), i)).ok());
  return testing::ReadFile(path);
}

TEST(ResultsIntegrity, EveryChangedByteOfASealedFileIsRefused) {
  testing::TempDir dir;
  const std::string good = SmallFile(dir);
  ASSERT_GT(good.size(), results::kSealBytes);
  const auto path = dir / "flipped.h5";
  const size_t sealed = good.size() - results::kSealBytes;
  // About 3,000 bytes spread over the sealed contents, then each seal byte.
  const size_t step = std::max<size_t>(1, sealed / 3000);
  std::vector<size_t> positions;
  for (size_t i = 0; i < sealed; i += step) positions.push_back(i);
  for (size_t i = sealed; i < good.size(); ++i) positions.push_back(i);
  int refused = 0, checked = 0;
  for (size_t i : positions) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    testing::WriteFile(path, bad);
    auto c = ResultsFile::Read(path, /*with_tables=*/true);
    ++checked;
    if (i < sealed || (i >= sealed + 16)) {  // contents, or the seal's length or checksum
      ASSERT_FALSE(c.ok()) << "byte " << i;
      EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
      EXPECT_THAT(std::string(c.status().message()), HasSubstr("corrupt results file")) << "byte " << i;
      EXPECT_THAT(std::string(c.status().message()), HasSubstr(path.string()));
      ++refused;
    }
    // A damaged seal marker leaves intact contents: read (through the child) or refused.
  }
  EXPECT_GT(checked, 2000);
  EXPECT_EQ(refused, checked - 16);
  // The good file still reads, with everything in it.
  testing::WriteFile(path, good);
  auto c = ResultsFile::Read(path, true);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->runs.size(), 2u);
  EXPECT_EQ(c->runs[1].output.tables.size(), 1u);
}

TEST(ResultsIntegrity, UnsealedFilesWithChangedBytesNeverCrashTheReader) {
  testing::TempDir dir;
  std::string good = SmallFile(dir);
  good.resize(good.size() - results::kSealBytes);  // as written before seals
  const auto path = dir / "old.h5";
  testing::WriteFile(path, good);
  ASSERT_TRUE(ResultsFile::Read(path, true).ok());
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<size_t> where(0, good.size() - 1);
  std::uniform_int_distribution<int> value(0, 255);
  int refused = 0, crashed = 0;
  for (int k = 0; k < 150; ++k) {
    std::string bad = good;
    bad[where(rng)] = static_cast<char>(value(rng));
    testing::WriteFile(path, bad);
    // Reaching the next line at all is the test: a crash would end this process.
    auto c = ResultsFile::Read(path, /*with_tables=*/true);
    if (!c.ok()) {
      ++refused;
      const std::string msg(c.status().message());
      EXPECT_THAT(msg, HasSubstr(path.string()));
      if (msg.find("crashed the HDF5 library") != std::string::npos) ++crashed;
    }
  }
  std::fprintf(stderr, "%d of 150 changed unsealed files refused (%d crashed the library in the child), the others read\n",
               refused, crashed);
}

TEST(ResultsIntegrity, FourWritersAtOnceKeepEveryRun) {
  testing::TempDir dir;
  const auto path = dir / "shared.h5";
  constexpr int kWriters = 4, kRuns = 10;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto f = ResultsFile::Open(path, Header());
      if (!f.ok()) ::_exit(2);
      for (int i = 0; i < kRuns; ++i) {
        if (!f->Append(MakeRun(absl::StrCat("w", w, "@", i), w * kRuns + i)).ok()) ::_exit(3);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "writer killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto c = ResultsFile::Read(path, false);
  ASSERT_TRUE(c.ok()) << c.status();
  std::set<std::string> ids;
  for (const StoredRun& r : c->runs) ids.insert(r.id);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kWriters * kRuns));
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < kRuns; ++i) EXPECT_EQ(ids.count(absl::StrCat("w", w, "@", i)), 1u);
  }
}

TEST(ResultsIntegrity, BackupsNeverReplaceOneAnother) {
  testing::TempDir dir;
  const auto path = dir / "r.h5";
  std::vector<std::string> backups;
  for (int k = 0; k < 3; ++k) {  // within one second: the same time stamp
    testing::WriteFile(path, absl::StrCat("contents ", k));
    auto b = ResultsFile::MoveAside(path);
    ASSERT_TRUE(b.ok()) << b.status();
    backups.push_back(*b);
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  EXPECT_EQ(std::set<std::string>(backups.begin(), backups.end()).size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(testing::ReadFile(backups[static_cast<size_t>(k)]), absl::StrCat("contents ", k));
}

TEST(ResultsIntegrity, TemporariesOfDeadWritersAreRemovedAtOpen) {
  testing::TempDir dir;
  const auto path = dir / "r.h5";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // its pid is now free
  const auto dead = dir / absl::StrCat("r.h5.tmp-", child);
  const auto alive = dir / "r.h5.tmp-1";  // init: always running
  testing::WriteFile(dead, "half a copy");
  testing::WriteFile(alive, "a copy in progress");
  auto f = ResultsFile::Open(path, Header());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));
}

StoredRun BigRun(const std::string& id, int index, double value) {
  StoredRun r = MakeRun(id, index);
  r.output.metrics.Add("stage_balance", value, "1", Better::kLower);
  Table t;
  t.name = "timeline";
  std::vector<double> column(20000);
  for (size_t i = 0; i < column.size(); ++i) column[i] = value + static_cast<double>(i);
  t.columns.push_back(Column{"start_s", "s", column});
  r.output.tables.push_back(t);
  return r;
}

// Rerunning runs replaces them without leaving their old space behind: after 20 reruns the
// file is about the size of its live runs (before, every rerun added a run's worth).
TEST(ResultsIntegrity, ReplacedRunsLeaveNoDeadSpace) {
  testing::TempDir dir;
  const auto path = dir / "r.h5";
  auto f = ResultsFile::Open(path, Header());
  ASSERT_TRUE(f.ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(f->Append(BigRun(absl::StrCat("a@", i), i, i)).ok());
  const auto live = std::filesystem::file_size(path);
  for (int k = 1; k <= 20; ++k) ASSERT_TRUE(f->Append(BigRun("a@0", 0, 100.0 * k)).ok());
  EXPECT_LT(std::filesystem::file_size(path), live + live / 5);
  auto c = ResultsFile::Read(path, true);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->runs.size(), 4u);
  EXPECT_EQ(c->runs[0].output.metrics.Find("stage_balance")->value, 2000.0);
  EXPECT_EQ(c->runs[3].output.metrics.Find("stage_balance")->value, 3.0);
}

// A file with dead space (as earlier versions left after reruns) is compacted to its live
// runs, which read back the same.
TEST(ResultsIntegrity, CompactRemovesDeadSpaceAndKeepsEveryRun) {
  testing::TempDir dir;
  const auto path = dir / "r.h5";
  {
    auto f = ResultsFile::Open(path, Header());
    ASSERT_TRUE(f.ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(f->Append(BigRun(absl::StrCat("a@", i), i, i)).ok());
  }
  auto before = ResultsFile::Read(path, true);
  ASSERT_TRUE(before.ok());
  // Dead space the old way: the same run unlinked and written again, ten times, in place.
  std::string bytes = testing::ReadFile(path);
  bytes.resize(bytes.size() - results::kSealBytes);
  testing::WriteFile(path, bytes);
  for (int k = 0; k < 10; ++k) {
    H5::H5File h(path.string(), H5F_ACC_RDWR);
    H5::Group runs = h.openGroup("runs");
    runs.unlink("a@1");
    H5::Group g = runs.createGroup("a@1");
    std::vector<double> filler(20000, 1.0);
    hsize_t n = filler.size();
    g.createDataSet("filler", H5::PredType::NATIVE_DOUBLE, H5::DataSpace(1, &n)).write(filler.data(), H5::PredType::NATIVE_DOUBLE);
  }
  const auto bloated = std::filesystem::file_size(path);
  auto done = ResultsFile::Compact(path);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->runs, 3);
  EXPECT_EQ(done->bytes_before, static_cast<std::int64_t>(bloated));
  EXPECT_LT(done->bytes_after * 3, done->bytes_before);
  auto after = ResultsFile::Read(path, true);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->runs.size(), 3u);
  EXPECT_EQ(after->runs[0].output.tables[0].columns[0].values, before->runs[0].output.tables[0].columns[0].values);
  EXPECT_EQ(after->header.experiment, "integrity");
  EXPECT_EQ(results::CheckSeal(path).value(), results::SealState::kSealed);
}

TEST(ResultsIntegrity, SealDetectsEveryChangedWord) {
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 31 + 7);
  const std::uint64_t h = results::Checksum(data.data(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    for (unsigned char x : {1, 0x80, 0xFF}) {
      data[i] ^= x;
      EXPECT_NE(results::Checksum(data.data(), data.size()), h) << i;
      data[i] ^= x;
    }
  }
  EXPECT_EQ(results::Checksum(data.data(), data.size()), h);
  EXPECT_NE(results::Checksum(data.data(), data.size() - 1), h);  // length counts
}

}  // namespace
}  // namespace testbed
