// Plans as lists of stages (core v3): stages on different device types with different
// tensor-parallel degrees, per-layer degrees with their groups and resharding, per-replica
// micro-batch counts; each against a closed form or a hand-worked case.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

NodeType Node(const std::string& device, int devices) {
  NodeType type;
  type.name = device + "-node";
  type.devices = devices;
  type.device.name = device;
  type.device.peak_flops[Precision::kFp16] = 100e12;
  type.device.memory_bytes = std::int64_t{80} << 30;
  type.device.memory_bandwidth_bytes_per_s = 1e12;
  type.hubs = {"switch"};
  type.nics = {"nic0"};
  LinkSpec link{"uniform", LinkKind::kOther, 10e9, 1e-6};
  for (int i = 0; i < devices; ++i) type.links.push_back({absl::StrCat("gpu", i), "switch", link});
  type.links.push_back({"nic0", "switch", link});
  type.nic_link = link;
  return type;
}

// Stage 0 on two A100s (tp 2), stage 1 on four V100s (tp 4).
struct Hetero {
  ModelGraph model = Gpt(6);
  Cluster cluster = *Cluster::Build("mixed", {NodeGroup{Node("a100", 2), 1}, NodeGroup{Node("v100", 4), 1}});
  Plan plan;
  Hetero(int blocks0, int m) {
    const int end0 = 1 + 2 * blocks0;
    Stage s0, s1;
    s0.chunks = {StageSpec{0, end0, 0}};
    s0.tp = 2;
    s0.device_type = "a100";
    s0.replicas = {StageReplica{{0, 1}, m}};
    s1.chunks = {StageSpec{end0, static_cast<int>(model.layers.size()), 0}};
    s1.tp = 4;
    s1.device_type = "v100";
    s1.replicas = {StageReplica{{2, 3, 4, 5}, m}};
    plan.stages = {s0, s1};
  }
};

absl::StatusOr<SimResult> SimulatePlan1F1B(const ModelGraph& model, const Cluster& cluster, const Plan& plan, const DeviceModel& dm,
                              bool free_comm, Schedule* out = nullptr) {
  TrainSettings train;
  collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm};
  const int pp = plan.pp();
  ExpandOptions opt;
  auto s = ExpandPipeline(ctx, ProgramSource([pp](int m) -> absl::StatusOr<PipelineProgram> {
                            return OneFOneBProgram(pp, m);
                          }),
                          opt);
  if (!s.ok()) return s.status();
  if (absl::Status st = s->Check(); !st.ok()) return st;
  SimOptions o;
  o.free_communication = free_comm;
  auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, o);
  if (out != nullptr) *out = std::move(*s);
  return r;
}

TEST(Placement, TwoDeviceTypesWithTheirOwnDegreesGiveTheBottleneckClosedForm) {
  constexpr double k = 1e-3;
  // A "v100" takes twice as long as an "a100"; a layer split over tp devices 1/tp of its time.
  const SpeedDeviceModel dm(k, {{"a100", 1.0}, {"v100", 0.5}});
  for (int blocks0 : {1, 2}) {
    for (int m : {1, 4, 7}) {
      Hetero h(blocks0, m);
      ASSERT_TRUE(h.plan.Validate(static_cast<int>(h.model.layers.size()), h.cluster).ok());
      // Per micro-batch: stage 0 runs 2 x blocks0 layers at k / 2 each, stage 1 the rest at
      // 2k / 4; backward twice forward.
      const double f0 = 2 * blocks0 * k / 2, f1 = 2 * (6 - blocks0) * 2 * k / 4;
      const double b0 = 2 * f0, b1 = 2 * f1;
      ASSERT_GT(f1, f0) << "the case worked by hand has the V100 stage as the bottleneck";
      // 1F1B on two stages with the second the slowest: it runs without a gap from the first
      // forward's arrival, and the first stage ends with the last backward.
      const double want = f0 + b0 + f1 + b1 + (m - 1) * (f1 + b1);
      auto r = SimulatePlan1F1B(h.model, h.cluster, h.plan, dm, true);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_NEAR(r->iteration_time_s, want, 1e-12) << "blocks0=" << blocks0 << " m=" << m;
    }
  }
}

// A tensor-parallel gang runs at the pace of its slowest member: a gang of A100s takes an
// A100's time, a gang of V100s a V100's, and one of each a V100's.
TEST(Placement, AGangOfMixedDeviceTypesRunsAtItsSlowestMembersPace) {
  constexpr double k = 1e-3;
  const SpeedDeviceModel dm(k, {{"a100", 1.0}, {"v100", 0.5}});
  const Hetero h(1, 1);
  int attention = -1;
  for (size_t l = 0; l < h.model.layers.size() && attention < 0; ++l) {
    if (h.model.layers[l].kind == LayerKind::kAttention) attention = static_cast<int>(l);
  }
  ASSERT_GE(attention, 0);
  const collectives::Ring ring(collectives::CommTuning{});
  // Devices 0-1 are A100s, 2-5 V100s; the layer split two ways takes k / 2 on an A100.
  for (const auto& [members, want] : std::vector<std::pair<std::vector<DeviceId>, double>>{
           {{0, 1}, k / 2}, {{2, 3}, k}, {{1, 2}, k}, {{2, 1}, k}}) {
    Schedule s(6);
    ComputeWork w;
    w.first_layer = attention;
    w.end_layer = attention + 1;
    w.tp = 2;
    Task t;
    t.group = s.Group(members);
    t.work = s.AddWork(w);
    t.first_layer = attention;
    t.end_layer = attention + 1;
    s.Add(t);
    SimOptions o;
    o.free_communication = true;
    auto r = Simulate(s, SimInputs{h.model, h.cluster, dm, ring}, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_DOUBLE_EQ(r->iteration_time_s, want) << members[0] << "," << members[1];
  }
}

TEST(Placement, ADeviceOfTheWrongTypeIsNamed) {
  Hetero h(2, 2);
  h.plan.stages[1].device_type = "a100";
  const absl::Status st = h.plan.Validate(static_cast<int>(h.model.layers.size()), h.cluster);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("stage 1 is for 'a100' devices, but device 2 is a 'v100'"), std::string::npos) << st;
}

TEST(Placement, PerReplicaMicroBatchCountsRunTheirOwnPrograms) {
  // Two replicas of one stage: one runs 3 micro-batches, the other 5 (a faster replica takes
  // more); the iteration is the longer one, and the gradient all-reduce joins them.
  const ModelGraph model = Gpt(2);
  const Cluster cluster = StarCluster(2, 1e10, 1e-6);
  constexpr double k = 1e-3;
  const ConstantDeviceModel dm(k);
  Plan plan;
  Stage st;
  st.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  st.replicas = {StageReplica{{0}, 3}, StageReplica{{1}, 5}};
  plan.stages = {st};
  ASSERT_TRUE(plan.Validate(static_cast<int>(model.layers.size()), cluster).ok());
  EXPECT_EQ(plan.TotalMicroBatches(), 8);
  EXPECT_FALSE(plan.Uniform().has_value());
  Schedule s;
  auto r = SimulatePlan1F1B(model, cluster, plan, dm, true, &s);
  ASSERT_TRUE(r.ok()) << r.status();
  // 4 layers x (k + 2k) per micro-batch on the replica with 5.
  EXPECT_NEAR(r->iteration_time_s, 5 * 4 * 3 * k, 1e-12);
  int forwards[2] = {0, 0};
  for (const Task& t : s.tasks()) {
    if (t.kind == TaskKind::kCompute && t.phase == Phase::kForward) ++forwards[t.device];
  }
  EXPECT_EQ(forwards[0], 3);
  EXPECT_EQ(forwards[1], 5);
}

TEST(Placement, PerLayerDegreesBuildTheirGroupsAndReshardingTransfers) {
  // One stage of 4 devices; attention layers at degree 4, MLP layers at degree 2 (two groups
  // of two, each on half the micro-batch).
  const ModelGraph model = Gpt(2, 256, 128);
  const Cluster cluster = StarCluster(4, 1e10, 1e-6);
  const ConstantDeviceModel dm(1e-3);
  GridSpec g;
  g.tp = 4;
  g.micro_batch = 2;
  g.micro_batches = 1;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  Plan plan = GridPlan(g);
  plan.layers.assign(model.layers.size(), LayerSetting{});
  for (size_t l = 0; l < model.layers.size(); ++l) {
    if (model.layers[l].kind == LayerKind::kMlp) plan.layers[l].tp = 2;
  }
  ASSERT_TRUE(plan.Validate(static_cast<int>(model.layers.size()), cluster).ok());
  Schedule s;
  auto r = SimulatePlan1F1B(model, cluster, plan, dm, false, &s);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<DeviceId> all = {0, 1, 2, 3}, low = {0, 1}, high = {2, 3};
  int mlp_gangs = 0, reshards = 0;
  // The MLP's input: the attention output (replicated on all four) already holds both halves,
  // so entering degree 2 moves nothing; leaving it, every device fetches the other half from
  // the matching rank of the other group.
  const double out_bytes = static_cast<double>(model.layers[1].output_bytes_per_sample) * 2;
  std::vector<std::int64_t> gather(16, 0);
  for (auto [src, dst] : {std::pair{2, 0}, {3, 1}, {0, 2}, {1, 3}}) gather[static_cast<size_t>(src * 4 + dst)] = static_cast<std::int64_t>(out_bytes / 2);
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    const Task& t = s.task(id);
    const Layer& layer = model.layers[static_cast<size_t>(t.first_layer)];
    if (t.kind == TaskKind::kCompute && layer.kind == LayerKind::kMlp) {
      const auto devs = s.DevicesOf(id);
      const std::vector<DeviceId> members(devs.begin(), devs.end());
      EXPECT_TRUE(members == low || members == high) << s.Describe(id);
      EXPECT_FLOAT_EQ(t.fraction, 0.5f);
      EXPECT_EQ(s.compute(id).tp, 2);
      ++mlp_gangs;
    }
    if (t.kind == TaskKind::kCompute && layer.kind == LayerKind::kAttention) {
      const auto devs = s.DevicesOf(id);
      EXPECT_EQ(std::vector<DeviceId>(devs.begin(), devs.end()), all);
    }
    if (t.kind == TaskKind::kCollective && t.op == CollectiveOp::kAllToAllV) {
      const auto& bytes = s.alltoallv_work()[static_cast<size_t>(t.work)].bytes;
      const bool empty = std::all_of(bytes.begin(), bytes.end(), [](std::int64_t b) { return b == 0; });
      // Forward into degree 2 and backward out of it move nothing; the other two gather.
      if (!empty) {
        EXPECT_EQ(bytes, gather) << s.Describe(id);
      }
      ++reshards;
    }
  }
  // 2 MLP layers x (forward + backward) x 2 groups.
  EXPECT_EQ(mlp_gangs, 8);
  // Each MLP layer: into it and out of it, forward and backward.
  EXPECT_EQ(reshards, 8);
  // The MLP gradients (a bucket per layer, as the degrees alternate): shard t of the two
  // groups is all-reduced between devices t and 2 + t.
  int mlp_syncs = 0;
  for (TaskId id = 0; id < static_cast<TaskId>(s.size()); ++id) {
    const Task& t = s.task(id);
    if (t.kind != TaskKind::kCollective || t.stream != streams::kDataComm) continue;
    const auto devs = s.DevicesOf(id);
    const std::vector<DeviceId> members(devs.begin(), devs.end());
    EXPECT_TRUE((members == std::vector<DeviceId>{0, 2}) || (members == std::vector<DeviceId>{1, 3})) << s.Describe(id);
    ++mlp_syncs;
  }
  EXPECT_EQ(mlp_syncs, 4);
}

TEST(Placement, APerLayerDegreeThatDoesNotDivideTheStageIsRefused) {
  const ModelGraph model = Gpt(1);
  const Cluster cluster = StarCluster(4, 1e10, 1e-6);
  GridSpec g;
  g.tp = 4;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  Plan plan = GridPlan(g);
  plan.layers.assign(model.layers.size(), LayerSetting{});
  plan.layers[2].tp = 3;
  const absl::Status st = plan.Validate(static_cast<int>(model.layers.size()), cluster);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("layer 2: tensor-parallel degree 3 does not divide its stage's 4 devices"), std::string::npos) << st;
}

}  // namespace
}  // namespace testbed::testing
