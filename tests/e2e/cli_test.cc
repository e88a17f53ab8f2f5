// The `testbed` command end to end: run, validate, show, plugins, with the plan backend and
// the test plugins (fixture.uniform / fixture.flops / fixture.fails / fixture.throws /
// fixture.slow). Results files are checked with the core's reader (and h5py when present).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testbed/plugin.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "results/results_file.h"
#include "test_support.h"

extern char** environ;

namespace testbed {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kGoodPlugins = std::string(TESTBED_TEST_PLUGIN_DIR) + "/good";
const std::string kBadPlugins = std::string(TESTBED_TEST_PLUGIN_DIR) + "/bad";

struct CliResult {
  int code = -1;
  std::string out, err;
};

class CliTest : public ::testing::Test {
 protected:
  // Starts `testbed args...` with stdout and stderr going to files in the temp directory.
  pid_t Spawn(const std::vector<std::string>& args, const std::string& plugin_path, const std::string& tag) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).rfind("TESTBED_", 0) != 0) env.emplace_back(*e);
    }
    env.push_back("TESTBED_PLUGIN_PATH=" + plugin_path);
    env.push_back(std::string("TESTBED_CONFIG_PATH=") + TESTBED_TEST_CONFIG_DIR);
    std::vector<std::string> argv = {TESTBED_EXE};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string out = (dir_ / (tag + ".out")).string(), err = (dir_ / (tag + ".err")).string();
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addchdir_np(&actions, dir_.path().c_str());
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, TESTBED_EXE, &actions, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&actions);
    return rc == 0 ? pid : -1;
  }

  CliResult Collect(pid_t pid, const std::string& tag) {
    CliResult r;
    int status = 0;
    if (pid > 0 && ::waitpid(pid, &status, 0) == pid) {
      r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    r.out = testing::ReadFile(dir_ / (tag + ".out"));
    r.err = testing::ReadFile(dir_ / (tag + ".err"));
    return r;
  }

  // A plan-backend experiment of `arms` arms (a0, a1, ...) whose planner sleeps `sleep_ms`.
  static std::string SlowPlanner(const std::string& name, int sleep_ms, int arms) {
    std::string text = absl::StrCat("device_model = \"fixture.flops\"\n",
                                    "partitioner = { use = \"fixture.slow\", sleep_ms = ", sleep_ms, " }\n",
                                    "[experiment]\nname = \"", name, "\"\nbackend = \"plan\"\noutput = \"{OUT}\"\n",
                                    "[cluster]\npreset = \"hpwnv\"\n[model]\npreset = \"gpt-1.5b\"\n");
    for (int i = 0; i < arms; ++i) absl::StrAppend(&text, "[[arm]]\nname = \"a", i, "\"\n");
    return text;
  }

  // Waits (up to two minutes) until `file` holds `text`: a spawned command reached that point.
  static bool WaitForText(const std::filesystem::path& file, const std::string& text) {
    for (int i = 0; i < 12000; ++i) {
      std::error_code ec;
      if (std::filesystem::exists(file, ec) && testing::ReadFile(file).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  CliResult Cli(const std::vector<std::string>& args, const std::string& plugin_path = kGoodPlugins) {
    const std::string tag = absl::StrCat("cmd", ++calls_);
    return Collect(Spawn(args, plugin_path, tag), tag);
  }

  // Writes an experiment file; {OUT} in the text becomes the results path.
  std::string Experiment(const std::string& name, std::string text) {
    const std::string file = (dir_ / (name + ".toml")).string();
    const std::string out = (dir_ / (name + ".h5")).string();
    for (size_t at; (at = text.find("{OUT}")) != std::string::npos;) text.replace(at, 5, out);
    testing::WriteFile(file, text);
    return file;
  }
  std::string Out(const std::string& name) const { return (dir_ / (name + ".h5")).string(); }

  testing::TempDir dir_;
  int calls_ = 0;
};

// Sweep of pp over {1, 2, 4} on one 4-GPU HPWNV node, two arms: 6 runs.
constexpr const char* kBasic = R"(device_model = "fixture.flops"

[experiment]
name = "basic"
backend = "plan"
output = "{OUT}"

[cluster]
preset = "hpwnv"

[model]
preset = "gpt-1.5b"

[train]
global_batch = 64
micro_batch = 2

[sweep]
"parallel.pp" = [1, 2, 4]

[[arm]]
name = "uniform"
partitioner = "fixture.uniform"

[[arm]]
name = "recompute"
partitioner = { use = "fixture.uniform", recompute_first = true }
)";

std::map<std::string, double> Metrics(const StoredRun& r) {
  std::map<std::string, double> m;
  for (const Metric& x : r.output.metrics.all()) m[x.name] = x.value;
  return m;
}

TEST_F(CliTest, RunRecordsEveryRunAndPrintsTheTable) {
  const std::string file = Experiment("basic", kBasic);
  CliResult r = Cli({"run", file});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("6 runs: 6 ran, 0 already in " + Out("basic") + ", 0 failed"));
  EXPECT_THAT(r.out, HasSubstr("stage_balance"));
  auto c = ResultsFile::Read(Out("basic"), true);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->runs.size(), 6u);
  std::vector<std::string> ids;
  for (const StoredRun& run : c->runs) {
    ids.push_back(run.id);
    EXPECT_EQ(run.status, "ok") << run.id << ": " << run.error;
    EXPECT_EQ(run.backend, "plan");
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"uniform@1", "recompute@1", "uniform@2", "recompute@2", "uniform@4",
                                           "recompute@4"}));
  // The plan follows [parallel] through the sweep: pp x dp = 4 devices, 64 / (2 x dp) micro-batches.
  for (const StoredRun& run : c->runs) {
    auto m = Metrics(run);
    const double pp = std::stod(run.point);
    EXPECT_EQ(m["pp"], pp) << run.id;
    EXPECT_EQ(m["dp"], 4 / pp) << run.id;
    EXPECT_EQ(m["micro_batches"], 64 / (2 * (4 / pp))) << run.id;
    // 98 layers (embedding, 48 x 2, head) in one stage: a single stage is perfectly balanced.
    if (pp == 1) {
      EXPECT_EQ(m["stage_balance"], 1.0) << run.id;
    }
  }
  // Resolved parameters are recorded with the run.
  std::map<std::string, ParamValue> params(c->runs[1].params.begin(), c->runs[1].params.end());
  EXPECT_EQ(std::get<std::string>(params.at("partitioner")), "fixture.uniform");
  EXPECT_EQ(std::get<bool>(params.at("partitioner.recompute_first")), true);
  EXPECT_EQ(std::get<std::int64_t>(params.at("parallel.pp")), 1);
  EXPECT_EQ(std::get<std::string>(params.at("cluster.preset")), "hpwnv");
}

TEST_F(CliTest, FailingArmsAreRecordedWhileTheOthersComplete) {
  const std::string file = Experiment("failing", R"(device_model = "fixture.flops"
[experiment]
name = "failing"
backend = "plan"
output = "{OUT}"
[cluster]
preset = "hpwnv"
[model]
preset = "gpt-1.5b"
[[arm]]
name = "good"
partitioner = "fixture.uniform"
[[arm]]
name = "fails"
partitioner = "fixture.fails"
[[arm]]
name = "throws"
partitioner = "fixture.throws"
[[arm]]
name = "after"
partitioner = "fixture.uniform"
)");
  CliResult r = Cli({"run", file});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 runs: 4 ran, 0 already in " + Out("failing") + ", 2 failed"));
  auto c = ResultsFile::Read(Out("failing"), false);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->runs.size(), 4u);
  EXPECT_EQ(c->runs[0].status, "ok");
  EXPECT_EQ(c->runs[1].status, "failed");
  EXPECT_THAT(c->runs[1].error, HasSubstr("fixture.fails: no plan fits"));
  EXPECT_EQ(c->runs[2].status, "failed");
  EXPECT_THAT(c->runs[2].error, HasSubstr("partitioner 'fixture.throws' threw: fixture.throws: thrown from Partition"));
  EXPECT_EQ(c->runs[3].status, "ok");
  EXPECT_FALSE(c->runs[3].output.metrics.empty());

  CliResult show = Cli({"show", Out("failing")});
  EXPECT_EQ(show.code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("failed fails: "));
  EXPECT_THAT(show.out, HasSubstr("failed throws: "));

  // A rerun retries the failed runs only.
  CliResult again = Cli({"run", file});
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.out, HasSubstr("4 runs: 2 ran, 2 already in " + Out("failing") + ", 2 failed"));
}

TEST_F(CliTest, ValidateAcceptsAGoodFile) {
  CliResult r = Cli({"validate", Experiment("basic", kBasic)});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("OK: 2 arms x 3 points = 6 runs"));
  EXPECT_FALSE(std::filesystem::exists(Out("basic")));
}

TEST_F(CliTest, ValidateReportsTomlSyntaxErrorsWithPosition) {
  std::string text = kBasic;
  text.replace(text.find("micro_batch = 2"), 15, "micro_batch = = 2");
  const std::string file = Experiment("syntax", text);
  CliResult r = Cli({"validate", file});
  EXPECT_NE(r.code, 0);
  // Line 16 of the file is "micro_batch = = 2": the second '=' is column 15.
  EXPECT_THAT(r.err, HasSubstr(file + ":16:15: TOML syntax error"));
}

TEST_F(CliTest, ValidateReportsBadKeysTypesRangesAndComponents) {
  std::string text = kBasic;
  text.replace(text.find("micro_batch = 2"), 15, "micro_bach = 2\nsteps = \"many\"\n[parallel]\nzero_stage = 5");
  text += R"(
[[arm]]
name = "typo"
partitioner = "fixture.unifrom"

[[arm]]
name = "badparam"
partitioner = { use = "fixture.uniform", micro_bacth = 2 }
)";
  const std::string file = Experiment("bad", text);
  CliResult r = Cli({"validate", file});
  EXPECT_NE(r.code, 0);
  // [train] is on line 14; the replacement puts micro_bach on 16, steps on 17, zero_stage on 19.
  EXPECT_THAT(r.err, HasSubstr(file + ":16:14: [train]: unknown key 'micro_bach' (did you mean 'micro_batch'?)"));
  EXPECT_THAT(r.err, HasSubstr(file + ":17:9: [train]: 'steps': expected int in [1, 16777216]"));
  EXPECT_THAT(r.err, HasSubstr("got \"many\""));
  EXPECT_THAT(r.err, HasSubstr(file + ":19:14: [parallel]: 'zero_stage': expected int in [0"));
  // Every run (4 arms x 3 points) has the [train] error; it is reported once.
  size_t count = 0;
  for (size_t at = 0; (at = r.err.find("unknown key 'micro_bach'", at)) != std::string::npos; ++at) ++count;
  EXPECT_EQ(count, 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("got 5"));
  // Unknown component: the message lists what is available.
  EXPECT_THAT(r.err, HasSubstr("unknown partitioner 'fixture.unifrom' (did you mean 'fixture.uniform'?); available: "));
  EXPECT_THAT(r.err, HasSubstr("fixture.fails"));
  EXPECT_THAT(r.err, HasSubstr("fixture.slow"));
  EXPECT_THAT(r.err, HasSubstr("partitioner 'fixture.uniform': unknown key 'micro_bacth' (did you mean 'micro_batch'?)"));
  // Nothing was run or written.
  EXPECT_FALSE(std::filesystem::exists(Out("bad")));
  // `run` refuses the same file before running anything.
  CliResult run = Cli({"run", file});
  EXPECT_NE(run.code, 0);
  EXPECT_FALSE(std::filesystem::exists(Out("bad")));
}

// A value every arm overrides is still checked: a wrong component or parameter there is an
// error at its line.
TEST_F(CliTest, ValidateChecksComponentsEveryArmOverrides) {
  const std::string file = Experiment("overridden", R"(partitioner = { use = "fixture.nosuch" }
device_model = { use = "fixture.flops", nosuch_param = 1 }
[experiment]
name = "overridden"
backend = "plan"
output = "{OUT}"
[cluster]
preset = "hpwnv"
[model]
preset = "gpt-1.5b"
[[arm]]
name = "x"
partitioner = "fixture.uniform"
device_model = "fixture.flops"
)");
  CliResult r = Cli({"validate", file});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr(file + ":1:"));
  EXPECT_THAT(r.err, HasSubstr("unknown partitioner 'fixture.nosuch'"));
  EXPECT_THAT(r.err, HasSubstr("checked although the arms or the sweep override it"));
  EXPECT_THAT(r.err, HasSubstr("unknown key 'nosuch_param'"));
  // Without the broken values the file is fine.
  const std::string good = Experiment("overridden_ok", R"(partitioner = "fixture.uniform"
device_model = "fixture.flops"
[experiment]
name = "overridden"
backend = "plan"
output = "{OUT}"
[cluster]
preset = "hpwnv"
[model]
preset = "gpt-1.5b"
[[arm]]
name = "x"
)");
  EXPECT_EQ(Cli({"validate", good}).code, 0);
}

// Section values every arm overrides are checked too: type, range and unknown keys at their
// line.
TEST_F(CliTest, ValidateChecksSectionValuesEveryArmOverrides) {
  const std::string file = Experiment("overridden_values", R"(partitioner = "fixture.uniform"
device_model = "fixture.flops"
[experiment]
name = "overridden"
backend = "plan"
output = "{OUT}"
[cluster]
preset = "hpwnv"
[model]
preset = "gpt-1.5b"
[train]
micro_batch = "x"
[parallel]
tp = 0
nosuch = 1
[[arm]]
name = "a"
train = { micro_batch = 2 }
parallel = { tp = 1 }
[[arm]]
name = "b"
train = { micro_batch = 4 }
parallel = { tp = 2 }
)");
  CliResult r = Cli({"validate", file});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr(file + ":12:15: [train]: 'micro_batch': expected int in [1, 1048576] (samples), got \"x\""));
  EXPECT_THAT(r.err, HasSubstr(file + ":14:6: [parallel]: 'tp': expected int in [1, 1048576] (devices), got 0"));
  EXPECT_THAT(r.err, HasSubstr(file + ":15:10: [parallel]: unknown key 'nosuch'"));
}

// Keys made by a dotted path (a sweep key, an arm's table, a --set) and sections merged from a
// preset are reported where they were written, not at the top of the file.
TEST_F(CliTest, ErrorsPointAtTheSweepKeyTheArmTheSetAndTheSection) {
  const std::string head = R"(partitioner = "fixture.uniform"
device_model = "fixture.flops"
[experiment]
name = "where"
backend = "plan"
output = "{OUT}"
[model]
preset = "gpt-1.5b"
)";
  const std::string cluster = "[cluster]\npreset = \"hpwnv\"\n";
  // Line 11: the sweep key.
  const std::string sweep = Experiment("where_sweep", head + cluster + "[sweep]\n\"nosuch.key\" = [1, 2]\n[[arm]]\nname = \"x\"\n");
  EXPECT_THAT(Cli({"validate", sweep}).err, HasSubstr(sweep + ":12:"));
  // Line 13: the arm's unknown table.
  const std::string arm = Experiment("where_arm", head + cluster + "[[arm]]\nname = \"x\"\nnosuch = { y = 1 }\n");
  EXPECT_THAT(Cli({"validate", arm}).err, HasSubstr(arm + ":13:"));
  // A --set names itself, without the line and column of the text made from it.
  const std::string plain = Experiment("where_set", head + cluster + "[[arm]]\nname = \"x\"\n");
  CliResult set = Cli({"validate", plain, "--set", "nosuch.key=1"});
  EXPECT_THAT(set.err, HasSubstr("\n--set nosuch.key=1: unknown key 'nosuch'"));
  // A cluster section without a node names the file and the section's line.
  const std::string nodeless = Experiment("where_cluster", head + "[cluster]\nnodes = 2\n[[arm]]\nname = \"x\"\n");
  EXPECT_THAT(Cli({"validate", nodeless}).err, HasSubstr(nodeless + ":9:1: [cluster]: give 'node' (a node type) or 'groups'"));
  // A node whose devices have no path between them: the file and the cluster's line.
  const std::string split = Experiment("where_node", head + R"([cluster]
nodes = 1
[cluster.node]
name = "split"
device = "a100-80gb"
devices = 2
hubs = ["sw"]
links = [["gpu0", "sw", "l"]]
[cluster.node.link_types]
l = { kind = "nvlink", bandwidth_gb_per_s = 300.0, latency_us = 0.7 }
[[arm]]
name = "x"
)");
  EXPECT_THAT(Cli({"validate", split}).err, HasSubstr(split + ":9:1: node type 'split': no path between gpu0 and gpu1"));
  // A required key out of range is one error, not also a missing key.
  const std::string range = Experiment("where_range", R"(partitioner = "fixture.uniform"
device_model = "fixture.flops"
[experiment]
name = "where"
backend = "plan"
output = "{OUT}"
[model]
family = "gpt"
layers = -3
hidden = 64
heads = 4
seq_len = 16
vocab = 100
[cluster]
preset = "hpwnv"
[[arm]]
name = "x"
)");
  CliResult ranged = Cli({"validate", range});
  EXPECT_THAT(ranged.err, HasSubstr(range + ":9:10: [model]: 'layers': expected int in [0, 16777216] (blocks), got -3"));
  EXPECT_THAT(ranged.err, Not(HasSubstr("missing required key")));
}

TEST_F(CliTest, ValidateReportsUnknownRootKeysAndComponentKinds) {
  std::string text = kBasic;
  text.insert(0, "paralel = { pp = 2 }\ncompressor = \"topk\"\n");
  const std::string file = Experiment("root", text);
  CliResult r = Cli({"validate", file});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr(file + ":1:11: unknown key 'paralel' (did you mean 'parallel'?)"));
  EXPECT_THAT(r.err, HasSubstr(file + ":2:14: 'compressor': backend 'plan' uses no compressor"));
}

TEST_F(CliTest, ModelsTooLargeForMemoryAreRefusedNotAborted) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "an address-space limit and a sanitizer's shadow memory do not mix";
#endif
  // 2^24 blocks are within range, but their graph (33.5 million layers, about 11 GB) is more
  // than a process limited to 3 GB of address space may take.
  std::string text = kBasic;
  const std::string preset = "preset = \"gpt-1.5b\"";
  text.replace(text.find(preset), preset.size(), preset + "\nlayers = 16777216");
  const std::string file = Experiment("huge", text);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = std::min<rlim_t>(saved.rlim_max, rlim_t{3} << 30);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &tight), 0);
  std::vector<CliResult> results;
  for (const char* command : {"validate", "run"}) {
    const std::string tag = absl::StrCat("huge-", command);
    const pid_t pid = Spawn({command, file}, kGoodPlugins, tag);  // the child inherits the limit
    results.push_back(Collect(pid, tag));
  }
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &saved), 0);
  for (const CliResult& r : results) {
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("is too large for this machine"));
    EXPECT_THAT(r.err, HasSubstr("address space"));
  }
  // Counts beyond what the testbed can hold are range errors naming the key.
  std::string wide = kBasic;
  wide.replace(wide.find(preset), preset.size(), preset + "\nlayers = 100000000000");
  CliResult r = Cli({"validate", Experiment("wide", wide)});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("'layers': expected int in [0, 16777216]"));
}

TEST_F(CliTest, CostPrintsALayerAndRefusesSizesOutOfRange) {
  CliResult ok = Cli({"cost", "--hidden", "4096", "--json"}, TESTBED_REAL_PLUGIN_DIR);
  ASSERT_EQ(ok.code, 0) << ok.err;
  for (const char* key : {"attn_fwd_s", "mlp_bwd_s", "memory_bytes"}) EXPECT_THAT(ok.out, HasSubstr(key));
  CliResult wide = Cli({"cost", "--hidden", "1000000000000"}, TESTBED_REAL_PLUGIN_DIR);
  EXPECT_NE(wide.code, 0);
  EXPECT_THAT(wide.err + wide.out, HasSubstr("--hidden: Value 1000000000000 not in range"));
}

TEST_F(CliTest, FilesThatAreNotExperimentsAndBadOptionsGetClearMessages) {
  CliResult dir = Cli({"run", dir_.path().string()});
  EXPECT_EQ(dir.code, 1);
  EXPECT_THAT(dir.err, HasSubstr(dir_.path().string() + ": is a directory, not a TOML file"));
  CliResult zero = Cli({"validate", "/dev/zero"});  // ends, instead of reading forever
  EXPECT_EQ(zero.code, 1);
  EXPECT_THAT(zero.err, HasSubstr("/dev/zero: more than 64 MiB, too large for a TOML file"));
  const std::string file = Experiment("basic", kBasic);
  CliResult jobs = Cli({"run", file, "-j", "0"});
  EXPECT_NE(jobs.code, 0);
  EXPECT_THAT(jobs.err + jobs.out, HasSubstr("--jobs: Value 0 not in range 1 to 4096"));
  CliResult device = Cli({"cost", "--device", "nosuch"}, TESTBED_REAL_PLUGIN_DIR);
  EXPECT_EQ(device.code, 1);
  EXPECT_THAT(device.err, HasSubstr("--device nosuch: no such device preset; available: a100-40gb"));
  CliResult unheld = Cli({"cost", "--device", "v100"}, TESTBED_REAL_PLUGIN_DIR);
  EXPECT_EQ(unheld.code, 1);
  EXPECT_THAT(unheld.err, HasSubstr("--device v100: no cluster preset holds it by default"));
}

TEST_F(CliTest, SetsThatSetNothingAreRefused) {
  const std::string file = Experiment("basic", kBasic);
  CliResult arm = Cli({"validate", file, "--set", "arm.uniform=3"});
  EXPECT_EQ(arm.code, 1);
  EXPECT_THAT(arm.err, HasSubstr("--set arm.uniform=3: an arm's key is set as arm.<name>.<key>=<value>"));
  CliResult point = Cli({"validate", file, "--set", "point=1"});
  EXPECT_EQ(point.code, 1);
  EXPECT_THAT(point.err, HasSubstr("--set point=1: points are [[point]] tables of the file"));
  CliResult newline = Cli({"validate", file, "--set", "train.micro_batch=2\nparallel.tp=2"});
  EXPECT_EQ(newline.code, 1);
  EXPECT_THAT(newline.err, HasSubstr("the value holds a line break"));
  CliResult path = Cli({"validate", file}, kGoodPlugins + ":/no/such/plugins");
  EXPECT_EQ(path.code, 0) << path.err;
  EXPECT_THAT(path.err, HasSubstr("/no/such/plugins: plugin search path entry is not a directory"));
}

TEST_F(CliTest, AMetricNoRunReportsIsAnError) {
  const std::string file = Experiment("basic", kBasic);
  CliResult r = Cli({"run", file, "--set", "experiment.metric=nosuch_metric"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("--set experiment.metric=nosuch_metric: [experiment] metric 'nosuch_metric': "
                               "no run reports it"));
  EXPECT_THAT(r.err, HasSubstr("they report: "));
  auto c = ResultsFile::Read(Out("basic"), false);  // the runs are kept
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->runs.size(), 6u);
}

TEST_F(CliTest, ValidateReportsUnknownPresets) {
  std::string text = kBasic;
  text.replace(text.find("\"hpwnv\""), 7, "\"hpwvn\"");
  const std::string file = Experiment("preset", text);
  CliResult r = Cli({"validate", file});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr(file + ":9:10: no clusters preset named 'hpwvn'; available: "));
  EXPECT_THAT(r.err, HasSubstr("hpwnv"));
}

TEST_F(CliTest, SetOnlyAndDryRun) {
  const std::string file = Experiment("basic", kBasic);
  CliResult dry = Cli({"run", file, "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("basic: 6 runs (backend plan)"));
  EXPECT_THAT(dry.out, HasSubstr("recompute@4"));
  EXPECT_THAT(dry.out, HasSubstr("partitioner=fixture.uniform"));
  EXPECT_FALSE(std::filesystem::exists(Out("basic")));

  // --only one arm.
  CliResult only = Cli({"run", file, "--only", "recompute"});
  ASSERT_EQ(only.code, 0) << only.err;
  EXPECT_THAT(only.out, HasSubstr("3 runs: 3 ran"));
  auto c = ResultsFile::Read(Out("basic"), false);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->runs.size(), 3u);
  for (const StoredRun& run : c->runs) EXPECT_EQ(run.arm, "recompute");
  // A dry run now marks the completed runs.
  CliResult dry_again = Cli({"run", file, "--dry-run"});
  ASSERT_EQ(dry_again.code, 0) << dry_again.err;
  size_t skipped = 0;
  for (size_t at = 0; (at = dry_again.out.find("(done, skipped)", at)) != std::string::npos; ++at) ++skipped;
  EXPECT_EQ(skipped, 3u) << dry_again.out;
  CliResult bad_only = Cli({"run", file, "--only", "nosuch"});
  EXPECT_NE(bad_only.code, 0);
  EXPECT_THAT(bad_only.err, HasSubstr("--only nosuch: no such arm; arms are uniform, recompute"));
  // --point one point (both arms).
  const std::string one_point = (dir_ / "one_point.h5").string();
  CliResult point = Cli({"run", file, "-o", one_point, "--point", "4"});
  ASSERT_EQ(point.code, 0) << point.err;
  EXPECT_THAT(point.out, HasSubstr("2 runs: 2 ran"));
  auto p4 = ResultsFile::Read(one_point, false);
  ASSERT_TRUE(p4.ok());
  ASSERT_EQ(p4->runs.size(), 2u);
  for (const StoredRun& run : p4->runs) EXPECT_EQ(run.point, "4");
  CliResult bad_point = Cli({"run", file, "--point", "5"});
  EXPECT_NE(bad_point.code, 0);
  EXPECT_THAT(bad_point.err, HasSubstr("--point 5: no such point; points are "));

  // --set pins the swept key (one point) and overrides another.
  const std::string pinned = (dir_ / "pinned.h5").string();
  CliResult set = Cli({"run", file, "-o", pinned, "--set", "parallel.pp=4", "--set", "train.micro_batch=4",
                       "--set", "arm.recompute.partitioner.micro_batch=8"});
  ASSERT_EQ(set.code, 0) << set.err;
  EXPECT_THAT(set.out, HasSubstr("2 runs: 2 ran"));
  auto p = ResultsFile::Read(pinned, false);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->runs.size(), 2u);
  EXPECT_EQ(p->runs[0].id, "uniform");
  EXPECT_EQ(Metrics(p->runs[0])["pp"], 4);
  EXPECT_EQ(Metrics(p->runs[0])["micro_batch"], 4);
  EXPECT_EQ(Metrics(p->runs[1])["micro_batch"], 8);  // the arm's own --set wins for that arm
  EXPECT_THAT(p->header.sets, ::testing::ElementsAre("parallel.pp=4", "train.micro_batch=4",
                                                      "arm.recompute.partitioner.micro_batch=8"));

  // A bad --set value is reported at the --set, not in the file.
  CliResult bad_set = Cli({"validate", file, "--set", "train.micro_batch=0"});
  EXPECT_NE(bad_set.code, 0);
  EXPECT_THAT(bad_set.err, HasSubstr("--set train.micro_batch=0: [train]: 'micro_batch': expected int in [1"));
}

TEST_F(CliTest, ParallelJobsGiveTheSameMetrics) {
  const std::string file = Experiment("basic", kBasic);
  const std::string one = (dir_ / "j1.h5").string(), two = (dir_ / "j2.h5").string();
  CliResult a = Cli({"run", file, "-j", "1", "-o", one});
  CliResult b = Cli({"run", file, "-j", "2", "-o", two});
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  auto ra = ResultsFile::Read(one, true), rb = ResultsFile::Read(two, true);
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->runs.size(), 6u);
  ASSERT_EQ(rb->runs.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const StoredRun &x = ra->runs[i], &y = rb->runs[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.seed, y.seed);
    EXPECT_EQ(x.config_hash, y.config_hash);
    auto mx = Metrics(x), my = Metrics(y);
    mx.erase("planning_time_s");  // wall-clock time of the planner, not a result
    my.erase("planning_time_s");
    EXPECT_EQ(mx, my) << x.id;
    ASSERT_EQ(x.output.tables.size(), y.output.tables.size());
    for (size_t t = 0; t < x.output.tables.size(); ++t) {
      ASSERT_EQ(x.output.tables[t].columns.size(), y.output.tables[t].columns.size());
      for (size_t k = 0; k < x.output.tables[t].columns.size(); ++k) {
        EXPECT_TRUE(x.output.tables[t].columns[k].values == y.output.tables[t].columns[k].values) << x.id;
      }
    }
  }
}

TEST_F(CliTest, ShowPrintsTheTableAndCsv) {
  const std::string file = Experiment("basic", kBasic + std::string("\n[reference]\n\"recompute/2\" = 0.5\n"));
  ASSERT_EQ(Cli({"run", file}).code, 0);
  CliResult show = Cli({"show", Out("basic")});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("parallel.pp"));
  EXPECT_THAT(show.out, HasSubstr("stage_balance"));
  EXPECT_THAT(show.out, HasSubstr("recompute"));

  CliResult csv = Cli({"show", "--csv", Out("basic")});
  ASSERT_EQ(csv.code, 0) << csv.err;
  std::vector<std::string> lines = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], "run,arm,point,metric,value,unit,speedup,reference,ratio");
  EXPECT_THAT(lines[1], StartsWith("uniform@1,uniform,1,stage_balance,1,1,1,,"));
  // recompute@2 carries the paper's figure; its ratio is its speedup / 0.5.
  std::vector<std::string> rec2 = absl::StrSplit(lines[4], ',');
  ASSERT_EQ(rec2.size(), 9u);
  EXPECT_EQ(rec2[0], "recompute@2");
  EXPECT_EQ(rec2[7], "0.5");
  EXPECT_NEAR(std::stod(rec2[8]), std::stod(rec2[6]) / 0.5, 1e-6);

  CliResult one = Cli({"show", Out("basic"), "--run", "recompute@4"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("run recompute@4 (index 5)"));
  EXPECT_THAT(one.out, HasSubstr("stage_time_max_s"));

  CliResult missing = Cli({"show", (dir_ / "none.h5").string()});
  EXPECT_NE(missing.code, 0);
  EXPECT_THAT(missing.err, HasSubstr("no such results file"));
}

TEST_F(CliTest, ResumeSkipsCompletedRuns) {
  const std::string file = Experiment("basic", kBasic);
  ASSERT_EQ(Cli({"run", file}).code, 0);
  auto first = ResultsFile::Read(Out("basic"), false);
  ASSERT_TRUE(first.ok());
  CliResult again = Cli({"run", file});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("6 runs: 0 ran, 6 already in " + Out("basic") + ", 0 failed"));
  auto second = ResultsFile::Read(Out("basic"), false);
  ASSERT_TRUE(second.ok());
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(first->runs[i].start_time, second->runs[i].start_time);
  // A changed configuration is not the same run: it runs again.
  CliResult changed = Cli({"run", file, "--set", "train.steps=2"});
  ASSERT_EQ(changed.code, 0) << changed.err;
  EXPECT_THAT(changed.out, HasSubstr("6 runs: 6 ran, 0 already in"));
}

// The same components from another library (a copy elsewhere on the plugin path, as a plugin
// shadowing another would be) are not the runs already done: they run again, and each run
// records the library of every component.
TEST_F(CliTest, RunsMadeWithAnotherPluginLibraryAreNotTakenAsDone) {
  const std::string file = Experiment("basic", kBasic);
  ASSERT_EQ(Cli({"run", file}).code, 0);
  const std::filesystem::path copy = dir_ / "shadow";
  std::filesystem::create_directories(copy);
  for (const auto& e : std::filesystem::directory_iterator(kGoodPlugins)) {
    if (e.path().extension() == ".so") std::filesystem::copy_file(e.path(), copy / e.path().filename());
  }
  CliResult shadowed = Cli({"run", file}, copy.string());
  ASSERT_EQ(shadowed.code, 0) << shadowed.err;
  EXPECT_THAT(shadowed.out, HasSubstr("6 runs: 6 ran, 0 already in"));
  auto stored = ResultsFile::Read(Out("basic"), false);
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::string library;
  for (const auto& [k, v] : stored->runs[0].params) {
    if (k == "library.partitioner") library = std::get<std::string>(v);
  }
  EXPECT_THAT(library, HasSubstr((copy / "fixture_good.so").string()));
  // With the same libraries again, they are done.
  CliResult again = Cli({"run", file}, copy.string());
  EXPECT_THAT(again.out, HasSubstr("6 runs: 0 ran, 6 already in"));
}

TEST_F(CliTest, CompareSaysWhatMovedAndExitsThreeWhenSomethingDid) {
  const std::string file = Experiment("basic", kBasic);
  ASSERT_EQ(Cli({"run", file}).code, 0);
  const std::string before = (dir_ / "before.h5").string(), after = (dir_ / "after.h5").string();
  std::filesystem::copy_file(Out("basic"), before);
  CliResult same = Cli({"compare", before, Out("basic")});
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_THAT(same.out, HasSubstr("6 runs and "));
  EXPECT_THAT(same.out, HasSubstr(": 0 changed, 0 beyond the tolerance"));
  // A larger micro-batch changes every run's configuration and figures.
  ASSERT_EQ(Cli({"run", file, "--set", "train.micro_batch=4", "-o", after}).code, 0);
  CliResult moved = Cli({"compare", before, after});
  EXPECT_EQ(moved.code, 3) << moved.out << moved.err;
  EXPECT_THAT(moved.out, HasSubstr("uniform@1: configuration changed"));
  EXPECT_THAT(moved.out, HasSubstr("  + micro_batch = 4"));
  EXPECT_THAT(moved.out, HasSubstr("(*)"));
  CliResult missing = Cli({"compare", before, (dir_ / "none.h5").string()});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("none.h5"));
}

// A Slurm job array's parts: --shard K/N runs every N-th run into its own file, merge joins
// them into what one unsharded run writes; files of another experiment, or of the same
// experiment set differently, are refused by name.
TEST_F(CliTest, ShardsMergedEqualTheUnshardedRun) {
  const std::string file = Experiment("basic", kBasic);
  ASSERT_EQ(Cli({"run", file}).code, 0);
  std::vector<std::string> parts;
  for (int k = 0; k < 4; ++k) {
    CliResult part = Cli({"run", file, "--shard", absl::StrCat(k, "/4")});
    ASSERT_EQ(part.code, 0) << part.err;
    const std::string name = (dir_ / absl::StrCat("basic.shard-", k, "-of-4.h5")).string();
    auto c = ResultsFile::Read(name, false);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->runs.size(), k < 2 ? 2u : 1u) << name;  // 6 runs dealt over 4 parts
    parts.push_back(name);
  }
  std::vector<std::string> merge = {"merge"};
  merge.insert(merge.end(), parts.begin(), parts.end());
  merge.insert(merge.end(), {"-o", (dir_ / "merged.h5").string()});
  CliResult merged = Cli(merge);
  ASSERT_EQ(merged.code, 0) << merged.err;
  EXPECT_THAT(merged.out, HasSubstr("6 runs from 4 files"));
  CliResult same = Cli({"compare", "--tolerance", "0", Out("basic"), (dir_ / "merged.h5").string()});
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_THAT(same.out, HasSubstr("6 runs and "));
  EXPECT_THAT(same.out, HasSubstr(": 0 changed, 0 beyond the tolerance 0"));
  // A part run with another --set is another configuration.
  const std::string other_set = (dir_ / "other_set.h5").string();
  ASSERT_EQ(Cli({"run", file, "--shard", "0/4", "--set", "train.steps=2", "-o", other_set}).code, 0);
  CliResult mixed = Cli({"merge", parts[1], other_set, "-o", (dir_ / "mixed.h5").string()});
  EXPECT_EQ(mixed.code, 1);
  EXPECT_THAT(mixed.err, HasSubstr("was run with --set train.steps=2"));
  // Another experiment is refused.
  const std::string other = Experiment("other", std::string(kBasic).replace(std::string(kBasic).find("name = \"basic\""), 14, "name = \"other\""));
  ASSERT_EQ(Cli({"run", other}).code, 0);
  CliResult foreign = Cli({"merge", parts[0], Out("other"), "-o", (dir_ / "foreign.h5").string()});
  EXPECT_EQ(foreign.code, 1);
  EXPECT_THAT(foreign.err, HasSubstr("holds experiment 'other'"));
  EXPECT_THAT(foreign.err, HasSubstr("files of different experiments are not merged"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "foreign.h5"));
  // A shard that is not one.
  CliResult bad = Cli({"run", file, "--shard", "4/4"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("--shard 4/4: expected K/N with 0 <= K < N"));
}

TEST_F(CliTest, FreshKeepsTheOldFileAsABackup) {
  const std::string file = Experiment("basic", kBasic);
  ASSERT_EQ(Cli({"run", file}).code, 0);
  const std::string before = testing::ReadFile(Out("basic"));
  CliResult fresh = Cli({"run", file, "--fresh"});
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_THAT(fresh.out, HasSubstr("6 runs: 6 ran, 0 already in"));
  EXPECT_THAT(fresh.err, HasSubstr("previous results kept as " + Out("basic") + "."));
  int backups = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("basic.h5.", 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".bak") {
      ++backups;
      EXPECT_EQ(testing::ReadFile(e.path()), before);
    }
  }
  EXPECT_EQ(backups, 1);
  // Twice more within a second or two: every earlier file is kept under a name of its own.
  ASSERT_EQ(Cli({"run", file, "--fresh"}).code, 0);
  ASSERT_EQ(Cli({"run", file, "--fresh"}).code, 0);
  backups = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("basic.h5.", 0) == 0 && name.substr(name.size() - 4) == ".bak") ++backups;
  }
  EXPECT_EQ(backups, 3);
}

TEST_F(CliTest, CompactRewritesAResultsFileWithItsRuns) {
  const std::string file = Experiment("basic", kBasic);
  ASSERT_EQ(Cli({"run", file}).code, 0);
  CliResult c = Cli({"compact", Out("basic")});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_THAT(c.out, HasSubstr(Out("basic") + ": 6 runs, "));
  CliResult show = Cli({"show", Out("basic")});
  EXPECT_EQ(show.code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("recompute"));
  EXPECT_NE(Cli({"compact", (dir_ / "none.h5").string()}).code, 0);
}

// Results files with changed bytes, sealed (as written now) and unsealed (as written before
// seals): show, show --run, trace and run --dry-run refuse or read them, and never crash.
TEST_F(CliTest, ChangedBytesInAResultsFileNeverCrashACommand) {
  const std::string file = Experiment("basic", kBasic);
  ASSERT_EQ(Cli({"run", file}).code, 0);
  const std::string sealed = testing::ReadFile(Out("basic"));
  const std::string unsealed = sealed.substr(0, sealed.size() - 32);
  const std::string path = (dir_ / "changed.h5").string();
  for (const std::string* good : {&sealed, &unsealed}) {
    for (int k = 0; k < 10; ++k) {
      std::string bad = *good;
      const size_t at = (static_cast<size_t>(k) * 2654435761u + 97) % bad.size();
      bad[at] = static_cast<char>(bad[at] ^ 0xA5);
      testing::WriteFile(path, bad);
      for (const std::vector<std::string>& args :
           {std::vector<std::string>{"show", path}, {"show", path, "--run", "recompute@4"},
            {"trace", path, "--run", "recompute@4"}, {"run", file, "-o", path, "--dry-run"}}) {
        CliResult r = Cli(args);
        EXPECT_LT(r.code, 128) << absl::StrJoin(args, " ") << " on byte " << at << (good == &sealed ? " (sealed)" : "")
                               << " died: " << r.err;
        if (good == &sealed && r.code != 0) {
          EXPECT_THAT(r.err, HasSubstr(path));
        }
      }
    }
  }
}

TEST_F(CliTest, InterruptStopsCleanlyAndTheSameCommandResumes) {
  const std::string file = Experiment("interrupted", SlowPlanner("interrupted", 300, 6));
  const std::string out = Out("interrupted");
  const pid_t pid = Spawn({"run", file, "-j", "1"}, kGoodPlugins, "interrupted");
  ASSERT_GT(pid, 0);
  size_t seen = 0;
  for (int i = 0; i < 3000 && seen < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::error_code ec;
    if (!std::filesystem::exists(out, ec)) continue;
    auto c = ResultsFile::Read(out, false);
    if (c.ok()) seen = c->runs.size();
  }
  ::kill(pid, SIGINT);
  CliResult stopped = Collect(pid, "interrupted");
  ASSERT_GE(seen, 1u);
  EXPECT_EQ(stopped.code, 1) << stopped.err;
  EXPECT_THAT(stopped.err, HasSubstr("interrupted after "));
  EXPECT_THAT(stopped.err, HasSubstr("the same command resumes"));
  auto c = ResultsFile::Read(out, false);
  ASSERT_TRUE(c.ok()) << c.status();
  const size_t done = c->runs.size();
  EXPECT_LT(done, 6u);
  CliResult again = Cli({"run", file});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr(absl::StrCat("6 runs: ", 6 - done, " ran, ", done, " already in")));
}

// Ctrl-C cancels a simulation in progress (GPT 20B on 16,384 simulated H100s, seconds of
// work): the command stops with the resume message and records nothing for the cut-short run,
// which the same command then runs again. A second Ctrl-C ends the process at once.
TEST_F(CliTest, InterruptCancelsASimulationInProgress) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const int nodes = 256;  // a sanitized build is ten times slower: still seconds of work
#else
  const int nodes = 2048;
#endif
  const std::string text = std::string(R"([experiment]
name = "long"
backend = "sim"
output = "{OUT}"
timeline = "off"
[cluster]
preset = "h100-superpod"
nodes = )") + std::to_string(nodes) + R"(
[model]
preset = "gpt-20b"
[train]
micro_batch = 1
micro_batches = 8
precision = "bf16"
[parallel]
tp = 1
pp = 8
recompute = "full"
[[arm]]
name = "1f1b"
partitioner = "megatron.uniform"
scheduler = "1f1b"
)";
  const std::string file = Experiment("long", text);
  const pid_t pid = Spawn({"run", file}, TESTBED_REAL_PLUGIN_DIR, "long");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForText(dir_ / "long.err", "started 1f1b")) << testing::ReadFile(dir_ / "long.err");
  ::kill(pid, SIGINT);  // while the schedule is built: the simulation stops at its first poll
  CliResult stopped = Collect(pid, "long");
  EXPECT_EQ(stopped.code, 1) << stopped.err;
  EXPECT_THAT(stopped.err, HasSubstr("interrupted after 0 of 1 runs"));
  auto c = ResultsFile::Read(Out("long"), false);
  EXPECT_TRUE(!c.ok() || c->runs.empty()) << "a cancelled run was recorded";

}

// Ctrl-C during real training (ranks that are threads) stops it at the next step: the command
// ends at once with the interruption, and the cancelled run is not recorded.
TEST_F(CliTest, InterruptStopsRealTrainingAtTheNextStep) {
  const std::string file = Experiment("train_long", R"(communicator = "local"
[experiment]
name = "train_long"
backend = "real"
output = "{OUT}"
[model]
name = "mlp"
family = "mlp"
layers = 2
hidden = 16
inputs = 64
vocab = 10
[data]
dataset = "digits"
[parallel]
dp = 2
[real]
check_against_single = false
predict = false
[train]
global_batch = 32
micro_batch = 16
steps = 16000000
optimizer = "sgd"
learning_rate = 0.1
precision = "fp32"
[[arm]]
name = "long"
)");
  const pid_t pid = Spawn({"run", file}, TESTBED_REAL_PLUGIN_DIR, "train_long");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForText(dir_ / "train_long.err", "started long")) << testing::ReadFile(dir_ / "train_long.err");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the training steps
  ::kill(pid, SIGINT);
  CliResult stopped = Collect(pid, "train_long");
  EXPECT_EQ(stopped.code, 1) << stopped.err;
  EXPECT_THAT(stopped.err, HasSubstr("interrupted after 0 of 1 runs"));
  auto c = ResultsFile::Read(Out("train_long"), false);
  EXPECT_TRUE(!c.ok() || c->runs.empty()) << "a cancelled run was recorded";
}

// A second Ctrl-C while the first waits for a run to end (a planner sleeping 3 s) ends the
// process at once, by the signal.
TEST_F(CliTest, SecondInterruptEndsTheProcessAtOnce) {
  const std::string file = Experiment("slow", SlowPlanner("slow", 3000, 1));
  const pid_t pid = Spawn({"run", file}, kGoodPlugins, "slow");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForText(dir_ / "slow.err", "started a")) << testing::ReadFile(dir_ / "slow.err");
  ::kill(pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // two signals sent at once merge
  ::kill(pid, SIGINT);
  CliResult killed = Collect(pid, "slow");
  EXPECT_EQ(killed.code, 128 + SIGINT) << killed.err;
}

TEST_F(CliTest, KillDuringAnExperimentLeavesAReadableFileAndResumes) {
  std::string text = R"(device_model = "fixture.flops"
partitioner = { use = "fixture.slow", sleep_ms = 300 }
[experiment]
name = "killed"
backend = "plan"
output = "{OUT}"
[cluster]
preset = "hpwnv"
[model]
preset = "gpt-1.5b"
)";
  for (int i = 0; i < 6; ++i) absl::StrAppend(&text, "[[arm]]\nname = \"a", i, "\"\n");
  const std::string file = Experiment("killed", text);
  const std::string out = Out("killed");

  const pid_t pid = Spawn({"run", file, "-j", "1"}, kGoodPlugins, "killed");
  ASSERT_GT(pid, 0);
  // Wait (up to a generous limit, never asserted on) until two runs are in the file.
  size_t seen = 0;
  for (int i = 0; i < 3000 && seen < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::error_code ec;
    if (!std::filesystem::exists(out, ec)) continue;
    auto c = ResultsFile::Read(out, false);
    if (c.ok()) seen = c->runs.size();
  }
  ::kill(pid, SIGKILL);
  CliResult killed = Collect(pid, "killed");
  ASSERT_GE(seen, 2u) << killed.err;
  EXPECT_EQ(killed.code, 128 + SIGKILL) << "the experiment finished before it could be killed";

  auto c = ResultsFile::Read(out, false);
  ASSERT_TRUE(c.ok()) << c.status();
  const size_t done = c->runs.size();
  EXPECT_GE(done, 2u);
  EXPECT_LT(done, 6u);
  for (size_t i = 0; i < done; ++i) {
    EXPECT_EQ(c->runs[i].id, absl::StrCat("a", i));
    EXPECT_EQ(c->runs[i].status, "ok");
  }
  CliResult show = Cli({"show", out});
  EXPECT_EQ(show.code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("a1"));

  // h5py, when installed, reads the same runs.
  if (std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") == 0) {
    const std::string cmd = absl::StrCat("/usr/bin/python3 -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r'); "
                                         "print(len(f['runs']), f.attrs['experiment'])\" '", out, "' > '",
                                         (dir_ / "h5py.out").string(), "' 2>&1");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << testing::ReadFile(dir_ / "h5py.out");
    EXPECT_EQ(testing::ReadFile(dir_ / "h5py.out"), absl::StrCat(done, " killed\n"));
  }

  // The same command again runs the rest and skips the completed ones.
  CliResult again = Cli({"run", file, "-j", "1"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr(absl::StrCat("6 runs: ", 6 - done, " ran, ", done, " already in ", out, ", 0 failed")));
  auto all = ResultsFile::Read(out, false);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->runs.size(), 6u);
  for (size_t i = 0; i < done; ++i) EXPECT_EQ(all->runs[i].start_time, c->runs[i].start_time);
}

TEST_F(CliTest, UnusableResultsFilesAreRefusedBeforeAnyRun) {
  const std::string file = Experiment("basic", kBasic);
  // An unwritable place (even root cannot create files under /dev/null).
  CliResult unwritable = Cli({"run", file, "-o", "/dev/null/sub/r.h5"});
  EXPECT_NE(unwritable.code, 0);
  EXPECT_THAT(unwritable.err, HasSubstr("/dev/null/sub/r.h5"));
  EXPECT_THAT(unwritable.err, Not(HasSubstr("done uniform")));
  EXPECT_THAT(unwritable.out, Not(HasSubstr("ran")));

  // A corrupt file is refused and left exactly as it was.
  const std::string garbage = "\x89garbage\0bytes\xff not hdf5 at all";
  testing::WriteFile(Out("basic"), garbage);
  CliResult corrupt = Cli({"run", file});
  EXPECT_NE(corrupt.code, 0);
  EXPECT_THAT(corrupt.err, HasSubstr("not a readable HDF5 file"));
  EXPECT_EQ(testing::ReadFile(Out("basic")), garbage);

  // A file of another experiment is refused and left as it was.
  std::filesystem::remove(Out("basic"));
  ASSERT_EQ(Cli({"run", file}).code, 0);
  const std::string before = testing::ReadFile(Out("basic"));
  std::string other = kBasic;
  other.replace(other.find("name = \"basic\""), 14, "name = \"other\"");
  CliResult clash = Cli({"run", Experiment("other", other), "-o", Out("basic")});
  EXPECT_NE(clash.code, 0);
  EXPECT_THAT(clash.err, HasSubstr("holds results of experiment 'basic', not 'other'"));
  EXPECT_EQ(testing::ReadFile(Out("basic")), before);
}

TEST_F(CliTest, PluginsListsLibrariesComponentsAndParameters) {
  CliResult r = Cli({"plugins"}, kGoodPlugins + ":" + kBadPlugins);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(kGoodPlugins + "/fixture_good.so"));
  EXPECT_THAT(r.out, HasSubstr("fixture          1.2.3"));
  EXPECT_THAT(r.out, HasSubstr("test fixture: uniform partitioner and FLOPs device model"));
  EXPECT_THAT(r.out, HasSubstr("partitioner fixture.uniform  (plugin fixture)"));
  EXPECT_THAT(r.out, HasSubstr("device_model fixture.flops  (plugin fixture)"));
  // Each parameter: name, type, default, unit, doc (and range).
  // (Other plugins may declare parameters of the same names: match on the doc too.)
  auto line_of = [&](const std::string& start, const std::string& doc) {
    for (absl::string_view l : absl::StrSplit(r.out, '\n')) {
      absl::string_view t = l;
      while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
      if (absl::StartsWith(t, start) && absl::StrContains(l, doc)) return std::string(l);
    }
    return std::string("(no line for ") + start + ")";
  };
  const std::string mb = line_of("micro_batch ", "micro-batch size; 0 takes [train] micro_batch");
  EXPECT_THAT(mb, HasSubstr(" int "));
  EXPECT_THAT(mb, HasSubstr("default 0 "));
  EXPECT_THAT(mb, HasSubstr("[samples]"));
  EXPECT_THAT(mb, HasSubstr("micro-batch size; 0 takes [train] micro_batch"));
  const std::string eff = line_of("efficiency ", "fraction of the peak reached");
  EXPECT_THAT(eff, HasSubstr(" float "));
  EXPECT_THAT(eff, HasSubstr("default 1.0 "));
  EXPECT_THAT(eff, HasSubstr("fraction of the peak reached"));
  EXPECT_THAT(eff, HasSubstr("[0.01..1]"));
  const std::string where = line_of("where ", "when to throw");
  EXPECT_THAT(where, HasSubstr("{partition|create}"));
  EXPECT_THAT(where, HasSubstr("default \"partition\""));
  // The refused libraries are listed with their reasons.
  EXPECT_THAT(r.out, HasSubstr("Not loaded ("));  // (the installed plugins' directory may add its own)
  EXPECT_THAT(r.out, HasSubstr("ABI version 999, but this testbed has ABI version " + std::to_string(kAbiVersion)));
  EXPECT_THAT(r.out, HasSubstr("fixture_rollback"));
  EXPECT_THAT(r.out, Not(HasSubstr("fixture.rollback_partitioner")));

  CliResult kind = Cli({"plugins", "--kind", "device_model"});
  ASSERT_EQ(kind.code, 0);
  EXPECT_THAT(kind.out, HasSubstr("fixture.flops"));
  EXPECT_THAT(kind.out, Not(HasSubstr("partitioner fixture.uniform")));
}

}  // namespace
}  // namespace testbed

namespace testbed {
namespace {

// `testbed export-chakra` writes a simulated run's schedule as Chakra traces;
// `testbed import-chakra` checks them and writes an experiment that simulates them, which
// gives the run's iteration time again.
TEST_F(CliTest, ExportedChakraTracesSimulateToTheRunsTime) {
  const std::string file = Experiment("pipe", R"([experiment]
name = "pipe"
backend = "sim"
output = "{OUT}"
[cluster]
preset = "dgx-a100"
[model]
name = "tiny-gpt"
layers = 8
hidden = 512
heads = 8
seq_len = 256
vocab = 1000
[parallel]
tp = 2
pp = 2
dp = 2
[train]
micro_batch = 1
micro_batches = 4
[[arm]]
name = "1f1b"
scheduler = "1f1b"
)");
  CliResult run = Cli({"run", file, "-q"}, TESTBED_REAL_PLUGIN_DIR);
  ASSERT_EQ(run.code, 0) << run.err;
  const std::string traces = (dir_ / "traces").string();
  CliResult ex = Cli({"export-chakra", Out("pipe"), "--run", "1f1b", "-o", traces}, TESTBED_REAL_PLUGIN_DIR);
  ASSERT_EQ(ex.code, 0) << ex.err;
  EXPECT_NE(ex.out.find("as 8 rank traces"), std::string::npos) << ex.out;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "traces" / "1f1b.7.et"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "traces" / "1f1b.comm_groups.json"));

  const std::string replay = (dir_ / "replay.toml").string();
  CliResult im = Cli({"import-chakra", traces + "/1f1b", "-o", replay, "--cluster", "dgx-a100"}, TESTBED_REAL_PLUGIN_DIR);
  ASSERT_EQ(im.code, 0) << im.err;
  EXPECT_NE(im.out.find("8 ranks"), std::string::npos) << im.out;
  EXPECT_EQ(im.out.find("not modelled"), std::string::npos) << im.out;
  CliResult again = Cli({"run", replay, "-q", "-o", Out("replay")}, TESTBED_REAL_PLUGIN_DIR);
  ASSERT_EQ(again.code, 0) << again.out << again.err;

  auto a = ResultsFile::Read(Out("pipe"), false);
  auto b = ResultsFile::Read(Out("replay"), false);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(b->runs.size(), 1u);
  ASSERT_EQ(b->runs[0].status, "ok") << b->runs[0].error;
  const double ta = Metrics(a->runs[0])["iteration_time_s"];
  const double tb = Metrics(b->runs[0])["iteration_time_s"];
  EXPECT_GT(ta, 0);
  EXPECT_NEAR(tb, ta, ta * 1e-12);
  EXPECT_EQ(Metrics(b->runs[0])["tasks"], Metrics(a->runs[0])["tasks"]);

  // A run that is not there, and a file that is not a trace.
  CliResult missing = Cli({"export-chakra", Out("pipe"), "--run", "nosuch", "-o", traces}, TESTBED_REAL_PLUGIN_DIR);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("no run 'nosuch' (runs: 1f1b)"), std::string::npos) << missing.err;
  testing::WriteFile(dir_ / "text.0.et", "DATA\n1\n");
  CliResult foreign = Cli({"import-chakra", (dir_ / "text").string()}, TESTBED_REAL_PLUGIN_DIR);
  EXPECT_EQ(foreign.code, 1);
  EXPECT_NE(foreign.err.find("text.0.et: not a Chakra trace"), std::string::npos) << foreign.err;
}

}  // namespace
}  // namespace testbed
