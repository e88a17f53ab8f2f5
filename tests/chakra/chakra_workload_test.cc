// Chakra traces simulated through `[workload]` with backend "sim": small hand-written traces
// (a compute chain, an all-reduce over a communicator group, a send/receive pair, an ASTRA-sim
// text workload) against hand-worked times on a star cluster, and what must be refused or
// named: a dependency cycle, collectives the ranks disagree on, what is not modelled.
//
// The cluster: N devices each on one link of B = 100 GB/s and 1 us to one switch. Ring
// all-reduce of S bytes over n members: 2(n-1)/n S/B + 2(n-1) x 2 us; a transfer: S/B + 2 us.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "chakra/astra_text.h"
#include "chakra/et_io.h"
#include "chakra/import.h"
#include "experiment_runs.h"
#include "sim/sim_backend.h"

namespace testbed::testing {
namespace {

using chakra::Attr;
using chakra::Node;
using chakra::NodeType;
using chakra::TraceSet;

constexpr double kB = 100e9, kLat = 1e-6;

double RingAllReduce(int n, double bytes) { return 2.0 * (n - 1) / n * bytes / kB + 2.0 * (n - 1) * 2 * kLat; }

Node Comp(std::uint64_t id, std::uint64_t micros, std::vector<std::uint64_t> deps = {}) {
  Node n;
  n.id = id;
  n.name = absl::StrCat("comp", id);
  n.type = static_cast<std::int32_t>(NodeType::kComp);
  n.duration_micros = micros;
  n.data_deps = std::move(deps);
  return n;
}

Node Coll(std::uint64_t id, chakra::CollType type, std::int64_t bytes, std::vector<std::uint64_t> deps,
          const std::string& group = "") {
  Node n;
  n.id = id;
  n.name = absl::StrCat("coll", id);
  n.type = static_cast<std::int32_t>(NodeType::kCommColl);
  n.data_deps = std::move(deps);
  n.attrs.push_back(Attr{"comm_type", static_cast<std::int64_t>(type), 0});
  n.attrs.push_back(Attr{"comm_size", bytes, 0});
  if (!group.empty()) n.attrs.push_back(Attr{"pg_name", group, 0});
  return n;
}

Node P2p(std::uint64_t id, bool send, int src, int dst, std::int64_t bytes, int tag, std::vector<std::uint64_t> deps) {
  Node n;
  n.id = id;
  n.name = send ? "send" : "recv";
  n.type = static_cast<std::int32_t>(send ? NodeType::kCommSend : NodeType::kCommRecv);
  n.data_deps = std::move(deps);
  n.attrs = {Attr{"comm_src", std::int64_t{src}, 0}, Attr{"comm_dst", std::int64_t{dst}, 0},
             Attr{"comm_size", bytes, 0}, Attr{"comm_tag", std::int64_t{tag}, 0}};
  return n;
}

class ChakraWorkload : public ExperimentRuns {
 protected:
  // Writes `set` under the temporary directory and simulates it on `devices` devices.
  absl::StatusOr<RunOutput> Simulate(const TraceSet& set, int devices, const std::string& workload_extra = "") {
    auto written = chakra::WriteTraceSet(set, (dir_ / "traces" / "job").string());
    if (!written.ok()) return written.status();
    return SimulateToml(absl::StrCat("chakra = \"traces/job\"\n", workload_extra), devices);
  }
  absl::StatusOr<RunOutput> SimulateToml(const std::string& workload, int devices) {
    SimBackend sim;
    auto outs = RunAll(absl::StrCat(R"(collective = "ring"
[experiment]
name = "chakra"
backend = "sim"
metric = "iteration_time_s"
[workload]
)", workload, R"(
[cluster]
name = "star"
[cluster.node]
name = "star"
devices = )", devices, R"(
hubs = ["switch"]
device_links = ["switch", "l100"]
[cluster.node.link_types]
l100 = { kind = "other", bandwidth_gb_per_s = 100, latency_us = 1 }
[cluster.node.device]
name = "ideal"
memory_gib = 80
memory_bandwidth_gb_per_s = 2000
[cluster.node.device.peak_tflops]
fp32 = 500
fp16 = 1000
[[arm]]
name = "traces"
)"),
                       sim);
    if (outs.size() != 1) return absl::InternalError("expected one run");
    return outs.front();
  }
};

TEST_F(ChakraWorkload, ComputeChainTakesTheSumOfItsDurations) {
  TraceSet set;
  set.ranks.resize(1);
  auto& nodes = set.ranks[0].nodes;
  nodes = {Comp(0, 1000), Comp(1, 2000, {0}), Comp(2, 3000, {1})};
  // The exact seconds win over the rounded microseconds.
  Node exact = Comp(3, 7, {2});
  exact.attrs.push_back(Attr{chakra::kAttrDuration, 0.5e-3, 0});
  nodes.push_back(exact);
  auto out = Simulate(set, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(MetricOf(*out, "iteration_time_s"), 6.5e-3, 1e-15);
  EXPECT_EQ(MetricOf(*out, "tasks"), 4);
  EXPECT_EQ(MetricOf(*out, "workload_ranks"), 1);
  EXPECT_EQ(MetricOf(*out, "mfu"), -1);  // no model: nothing to count FLOPs of
  // The usual tables, the timeline among them.
  EXPECT_EQ(ColumnOf<double>(*out, "timeline", "start_s").size(), 4u);
  EXPECT_FALSE(ColumnOf<std::int64_t>(*out, "per_device", "device").empty());
}

TEST_F(ChakraWorkload, AllReduceOverACommunicatorGroup) {
  constexpr std::int64_t kS = 64 << 20;
  TraceSet set;
  set.ranks.resize(4);
  set.comm_groups = {{"7", {0, 1, 2, 3}}, {"8", {0, 2}}};
  for (int r = 0; r < 4; ++r) {
    auto& nodes = set.ranks[static_cast<size_t>(r)].nodes;
    nodes = {Comp(0, 1000), Coll(1, chakra::CollType::kAllReduce, kS, {0}, "7"), Comp(2, 1000, {1})};
    // Ranks 0 and 2 then all-reduce again among themselves.
    if (r % 2 == 0) nodes.push_back(Coll(3, chakra::CollType::kAllReduce, kS, {2}, "8"));
  }
  auto out = Simulate(set, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  const double expected = 2e-3 + RingAllReduce(4, kS) + RingAllReduce(2, kS);
  EXPECT_NEAR(MetricOf(*out, "iteration_time_s"), expected, expected * 1e-9);
}

TEST_F(ChakraWorkload, SendAndReceivePair) {
  constexpr std::int64_t kS = 10'000'000;
  TraceSet set;
  set.ranks.resize(2);
  set.ranks[0].nodes = {Comp(0, 1000), P2p(1, true, 0, 1, kS, 5, {0})};
  set.ranks[1].nodes = {P2p(10, false, 0, 1, kS, 5, {}), Comp(11, 1000, {10})};
  auto out = Simulate(set, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  const double expected = 2e-3 + kS / kB + 2 * kLat;
  EXPECT_NEAR(MetricOf(*out, "iteration_time_s"), expected, expected * 1e-9);
}

TEST_F(ChakraWorkload, DependencyCycleIsRefusedNamingItsNodes) {
  TraceSet set;
  set.ranks.resize(1);
  set.ranks[0].nodes = {Comp(0, 1000, {2}), Comp(1, 1000, {0}), Comp(2, 1000, {1})};
  auto out = Simulate(set, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("can never run"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("node 0 'comp0'"), std::string::npos) << out.status();
}

TEST_F(ChakraWorkload, RanksThatDisagreeOnACollectiveAreNamed) {
  TraceSet set;
  set.ranks.resize(2);
  set.ranks[0].nodes = {Coll(0, chakra::CollType::kAllReduce, 100, {}), Coll(1, chakra::CollType::kAllReduce, 100, {0})};
  set.ranks[1].nodes = {Coll(0, chakra::CollType::kAllReduce, 100, {})};
  auto out = Simulate(set, 2);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("rank(s) 1 list fewer collectives"), std::string::npos) << out.status();
  set.ranks[1].nodes.push_back(Coll(1, chakra::CollType::kAllGather, 100, {0}));
  out = Simulate(set, 2);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("allgather here but allreduce"), std::string::npos) << out.status();
}

TEST_F(ChakraWorkload, WhatIsNotModelledIsNamedAndPassedThrough) {
  TraceSet set;
  set.ranks.resize(1);
  Node storage;
  storage.id = 1;
  storage.name = "read-checkpoint";
  storage.type = static_cast<std::int32_t>(NodeType::kStorage);
  storage.data_deps = {0};
  Node after = Comp(2, 2000, {1});  // waits for comp0 through the storage node
  after.attrs.push_back(Attr{"rf_id", std::int64_t{42}, 0});
  set.ranks[0].nodes = {Comp(0, 1000), storage, after};
  auto out = Simulate(set, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(MetricOf(*out, "iteration_time_s"), 3e-3, 1e-15);
  EXPECT_EQ(MetricOf(*out, "workload_warnings"), 2);
  std::string notes;
  for (const std::string& n : out->notes) notes += n + "\n";
  EXPECT_NE(notes.find("node type STORAGE_NODE (8) not modelled"), std::string::npos) << notes;
  EXPECT_NE(notes.find("attribute 'rf_id' not modelled: 1 node"), std::string::npos) << notes;
}

TEST_F(ChakraWorkload, TruncatedTraceIsAnErrorNamingTheFile) {
  TraceSet set;
  set.ranks.resize(1);
  set.ranks[0].nodes = {Comp(0, 1000), Comp(1, 1000, {0})};
  const std::string bytes = chakra::EncodeTrace(set.ranks[0]);
  std::filesystem::create_directories(dir_ / "cut");
  WriteFile(dir_ / "cut" / "job.0.et", bytes.substr(0, bytes.size() - 3));
  auto out = SimulateToml("chakra = \"cut/job\"\n", 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("job.0.et"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("truncated at byte"), std::string::npos) << out.status();
}

// DATA, 3 layers of 1 ms forward, 1 ms input gradient and 1 ms weight gradient, an
// all-reduce of S after each weight gradient (shorter than the backward that follows it), on
// 4 ranks: 3 + 3 + 2 ms of compute (layer 1 has no input gradient) and the last all-reduce
// exposed.
TEST_F(ChakraWorkload, AstraTextDataParallelWorkload) {
  constexpr std::int64_t kS = 16 << 20;
  std::string text = "DATA\n3\n";
  for (int l = 1; l <= 3; ++l) {
    absl::StrAppend(&text, "layer", l, "\t-1\t1000000\tNONE\t0\t1000000\tNONE\t0\t1000000\tALLREDUCE\t", kS, "\t10\n");
  }
  WriteFile(dir_ / "data.txt", text);
  auto out = SimulateToml("astra_text = \"data.txt\"\n", 4);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_LT(RingAllReduce(4, kS), 2e-3);
  const double expected = 8e-3 + RingAllReduce(4, kS);
  EXPECT_NEAR(MetricOf(*out, "iteration_time_s"), expected, expected * 1e-9);
  EXPECT_EQ(MetricOf(*out, "workload_ranks"), 4);
  EXPECT_EQ(MetricOf(*out, "tasks"), 4 * 8 + 3);  // 8 kernels per rank, 3 all-reduces over all of them
  // A malformed layer line is named by file and line.
  WriteFile(dir_ / "bad.txt", "DATA\n1\nlayer1\t-1\t1000\tNONE\n");
  out = SimulateToml("astra_text = \"bad.txt\"\n", 4);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("bad.txt:3: 4 fields, a layer has 12"), std::string::npos) << out.status();
}

// MODEL, 2 layers of 1 ms per pass, an all-reduce of S after each forward and after layer
// 2's input gradient, on 4 ranks: fwd1, a, fwd2, a, ig2, then wg2 beside the input
// gradient's all-reduce (a < 1 ms), ig1, wg1: 6 ms + 2a.
TEST_F(ChakraWorkload, AstraTextModelParallelWorkload) {
  constexpr std::int64_t kS = 8 << 20;
  std::string text = "MODEL\n2\n";
  for (int l = 1; l <= 2; ++l) {
    absl::StrAppend(&text, "layer", l, " -1 1000000 ALLREDUCE ", kS, " 1000000 ALLREDUCE ", kS, " 1000000 NONE 0 10\n");
  }
  WriteFile(dir_ / "model.txt", text);
  auto out = SimulateToml("astra_text = \"model.txt\"\n", 4);
  ASSERT_TRUE(out.ok()) << out.status();
  const double a = RingAllReduce(4, kS);
  ASSERT_LT(a, 1e-3);
  EXPECT_NEAR(MetricOf(*out, "iteration_time_s"), 6e-3 + 2 * a, 1e-12);
}

// HYBRID_TRANSFORMER with model-parallel groups of 2 on 4 ranks: forward and input-gradient
// communication inside {0,1} and {2,3}, weight gradients over {0,2} and {1,3}.
TEST(AstraText, HybridGroupsAndStructure) {
  const std::string text =
      "HYBRID_TRANSFORMER\tmodel_parallel_NPU_group: 2\n2\n"
      "a\t-1\t10\tALLREDUCE\t64\t20\tALLREDUCE\t64\t30\tALLREDUCE\t128\t1\n"
      "b\t-1\t10\tNONE\t0\t20\tALLGATHER\t64\t30\tREDUCESCATTER\t128\t1\n";
  chakra::TextWorkloadOptions opt;
  opt.ranks = 4;
  opt.passes = 2;
  auto set = chakra::ConvertTextWorkloadString(text, "hybrid.txt", opt);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->ranks.size(), 4u);
  const std::vector<std::pair<std::string, std::vector<int>>> groups = {
      {"mp0", {0, 1}}, {"mp1", {2, 3}}, {"dp0", {0, 2}}, {"dp1", {1, 3}}};
  EXPECT_EQ(set->comm_groups, groups);
  // Per pass: 2 forwards + a's forward all-reduce (b has none); b: input gradient, its
  // all-gather, weight gradient, its reduce-scatter; a: input gradient (no communication for
  // the first layer's), weight gradient, its all-reduce.
  EXPECT_EQ(set->ranks[3].nodes.size(), 2u * (3 + 4 + 3));
  int mp = 0, dp = 0;
  for (const Node& n : set->ranks[3].nodes) {
    const Attr* g = n.Find("pg_name");
    if (g == nullptr) continue;
    mp += *g->AsString() == "mp1";
    dp += *g->AsString() == "dp1";
  }
  EXPECT_EQ(mp, 2 * 2);
  EXPECT_EQ(dp, 2 * 2);
  auto imported = chakra::ImportTraceSet(*set, "hybrid.txt");
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(imported->schedule.Check().ok());
  // HYBRID_DLRM is refused by name.
  auto dlrm = chakra::ConvertTextWorkloadString("HYBRID_DLRM 1\n1\n", "dlrm.txt", opt);
  ASSERT_FALSE(dlrm.ok());
  EXPECT_NE(dlrm.status().message().find("dlrm.txt:1: parallelism 'HYBRID_DLRM' is not supported"), std::string::npos);
}

TEST_F(ChakraWorkload, WorkloadAndModelTogetherAreRefused) {
  auto out = SimulateToml("astra_text = \"x.txt\"\n[model]\npreset = \"gpt-1.5b\"\n", 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("[model] and [workload] astra_text both describe the job"), std::string::npos)
      << out.status();
}

}  // namespace
}  // namespace testbed::testing
