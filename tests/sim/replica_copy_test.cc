// Replica copying (core/src/expand/replica_copy.h): where every data-parallel replica walks
// alike, the compute pass copies replica 0's tasks instead of walking the others. The
// reference is the walk itself: for every plan below the schedule built with copying is the
// one built without, task for task (every field, dependencies, stream orders, groups, work
// tables, static memory), and the copy is used exactly where the replicas are alike.
#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>

#include "expand/replica_copy.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

struct Case {
  std::string name;
  int tp = 1, pp = 1, dp = 2, virtual_stages = 1;
  int micro_batches = 4, iterations = 1;
  RecomputeMode recompute = RecomputeMode::kNone;
  bool sequence_parallel = false;
  int zero_stage = 0;
  bool gpipe = false, two_bw = false;
  bool copied = true;  // whether the replicas are alike
  std::function<void(Plan&, int layers)> edit_plan = {};
  std::function<void(ExpandOptions&)> edit_options = {};
};

Plan MakePlan(const Case& c, const ModelGraph& model) {
  GridSpec g;
  g.tp = c.tp;
  g.pp = c.pp;
  g.dp = c.dp;
  g.virtual_stages = c.virtual_stages;
  g.micro_batches = c.micro_batches;
  g.recompute = c.recompute;
  g.sequence_parallel = c.sequence_parallel;
  g.zero_stage = c.zero_stage;
  g.chunks = UniformStages(static_cast<int>(model.layers.size()), c.pp * c.virtual_stages);
  if (c.recompute == RecomputeMode::kFull) {
    for (StageSpec& s : g.chunks) s.recompute_layers = s.end_layer - s.first_layer;
  }
  Plan plan = GridPlan(g);
  if (c.edit_plan) c.edit_plan(plan, static_cast<int>(model.layers.size()));
  return plan;
}

absl::StatusOr<Schedule> Build(const Case& c, bool copy) {
  const ModelGraph model = Gpt(8, 256, 128);
  const Cluster cluster = StarCluster(c.tp * c.pp * c.dp, 100e9, 1e-6);
  const Plan plan = MakePlan(c, model);
  TrainSettings train;
  const ConstantDeviceModel dm(1e-3);
  SchedulingContext ctx{model, cluster, plan, train, dm, nullptr, nullptr, c.iterations};
  ExpandOptions options;
  if (c.edit_options) c.edit_options(options);
  ProgramSource programs = [&](int m) -> absl::StatusOr<PipelineProgram> {
    if (c.virtual_stages > 1) return InterleavedProgram(c.pp, c.virtual_stages, m);
    if (c.two_bw) return PipeDream2BWProgram(c.pp, m, c.iterations);
    return c.gpipe ? GPipeProgram(c.pp, m) : OneFOneBProgram(c.pp, m);
  };
  expand::SetReplicaCopy(copy);
  auto s = ExpandPipeline(ctx, programs, options);
  expand::SetReplicaCopy(true);
  return s;
}

// Every field of two tasks; "" when equal.
std::string TaskDiff(const Task& a, const Task& b) {
  std::string d;
  auto field = [&](const char* name, auto x, auto y) {
    if (!(x == y)) d += std::string(name) + " ";
  };
  field("kind", a.kind, b.kind);
  field("stream", a.stream, b.stream);
  field("phase", a.phase, b.phase);
  field("op", a.op, b.op);
  field("checkpoint", a.checkpoint, b.checkpoint);
  field("priority", a.priority, b.priority);
  field("links", a.links, b.links);
  field("device", a.device, b.device);
  field("peer", a.peer, b.peer);
  field("group", a.group, b.group);
  field("match", a.match, b.match);
  field("stage", a.stage, b.stage);
  field("chunk", a.chunk, b.chunk);
  field("replica", a.replica, b.replica);
  field("micro_batch", a.micro_batch, b.micro_batch);
  field("iteration", a.iteration, b.iteration);
  field("first_layer", a.first_layer, b.first_layer);
  field("end_layer", a.end_layer, b.end_layer);
  field("fraction", a.fraction, b.fraction);
  field("sub_batch", a.sub_batch, b.sub_batch);
  field("sub_batches", a.sub_batches, b.sub_batches);
  field("bytes", a.bytes, b.bytes);
  field("work", a.work, b.work);
  return d;
}

void ExpectSame(const Schedule& a, const Schedule& b) {
  ASSERT_EQ(a.size(), b.size());
  for (TaskId t = 0; t < static_cast<TaskId>(a.size()); ++t) {
    const std::string d = TaskDiff(a.task(t), b.task(t));
    ASSERT_EQ(d, "") << "task " << t << ": " << a.Describe(t) << " against " << b.Describe(t);
    const auto da = a.deps(t), db = b.deps(t);
    ASSERT_EQ(std::vector<TaskId>(da.begin(), da.end()), std::vector<TaskId>(db.begin(), db.end())) << a.Describe(t);
  }
  EXPECT_EQ(a.groups(), b.groups());
  EXPECT_EQ(a.compute_work(), b.compute_work());
  EXPECT_EQ(a.kernel_work(), b.kernel_work());
  EXPECT_EQ(a.alltoallv_work(), b.alltoallv_work());
  EXPECT_EQ(a.copy_work(), b.copy_work());
  EXPECT_EQ(a.iterations(), b.iterations());
  EXPECT_EQ(a.streams_used(), b.streams_used());
  EXPECT_EQ(a.overlapping_iterations(), b.overlapping_iterations());
  EXPECT_EQ(a.weight_versions(), b.weight_versions());
  ASSERT_EQ(a.num_devices(), b.num_devices());
  for (DeviceId d = 0; d < a.num_devices(); ++d) {
    EXPECT_EQ(a.static_bytes(d), b.static_bytes(d)) << "device " << d;
    for (int st = 0; st < streams::kCount; ++st) EXPECT_EQ(a.Order(d, st), b.Order(d, st)) << "device " << d << " stream " << st;
  }
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ReplicaCopy : public ::testing::TestWithParam<Case> {};

TEST_P(ReplicaCopy, BuildsTheScheduleTheWalkBuilds) {
  const Case& c = GetParam();
  auto walked = Build(c, false);
  ASSERT_TRUE(walked.ok()) << walked.status();
  const std::int64_t before = expand::ReplicaCopiedTasks();
  auto copied = Build(c, true);
  ASSERT_TRUE(copied.ok()) << copied.status();
  const std::int64_t tasks = expand::ReplicaCopiedTasks() - before;
  ASSERT_TRUE(copied->Check().ok()) << copied->Check();
  ExpectSame(*walked, *copied);
  if (c.copied) {
    // Every replica but the first is a copy: (dp - 1) of dp replicas' compute-pass tasks.
    int replica0 = 0, later = 0;
    for (const Task& t : walked->tasks()) {
      if (t.micro_batch < 0 && t.kind != TaskKind::kKernel) continue;  // gradient sync and the like
      (t.replica == 0 ? replica0 : later) += 1;
    }
    EXPECT_EQ(tasks, static_cast<std::int64_t>(replica0) * (c.dp - 1));
    EXPECT_EQ(later, replica0 * (c.dp - 1));
  } else {
    EXPECT_EQ(tasks, 0);
  }
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  v.push_back({.name = "dp4", .dp = 4});
  v.push_back({.name = "tp2_pp2_dp16", .tp = 2, .pp = 2, .dp = 16});
  v.push_back({.name = "tp2_pp2_dp3_full_recompute", .tp = 2, .pp = 2, .dp = 3, .recompute = RecomputeMode::kFull});
  v.push_back({.name = "tp2_pp2_dp2_selective_sp", .tp = 2, .pp = 2, .dp = 2, .recompute = RecomputeMode::kSelective,
               .sequence_parallel = true});
  v.push_back({.name = "pp2_dp2_interleaved", .pp = 2, .dp = 2, .virtual_stages = 2, .micro_batches = 4});
  v.push_back({.name = "pp2_dp3_gpipe_two_iterations", .pp = 2, .dp = 3, .iterations = 2, .gpipe = true});
  v.push_back({.name = "pp2_dp2_2bw", .pp = 2, .dp = 2, .iterations = 3, .two_bw = true});
  v.push_back({.name = "tp2_dp2_zero1_two_iterations", .tp = 2, .dp = 2, .iterations = 2, .zero_stage = 1});
  v.push_back({.name = "pp2_dp2_zero2", .pp = 2, .dp = 2, .zero_stage = 2});
  v.push_back({.name = "tp2_pp2_dp2_tp_overlap", .tp = 2, .pp = 2, .dp = 2,
               .edit_options = [](ExpandOptions& o) {
                 o.tp_overlap = true;
                 o.tp_chunks = 2;
               }});
  v.push_back({.name = "pp2_dp2_split_backward_no_step", .pp = 2, .dp = 2,
               .edit_options = [](ExpandOptions& o) {
                 o.split_backward = true;
                 o.optimizer_step = false;
                 o.dp_bucket_bytes = 1 << 20;
               }});
  v.push_back({.name = "tp2_pp2_dp2_recompute_interleaved", .tp = 2, .pp = 2, .dp = 2, .recompute = RecomputeMode::kFull,
               .edit_options = [](ExpandOptions& o) { o.recompute_interleaved = true; }});
  // Per-layer tensor-parallel degrees: sub-groups of the stage's ranks.
  v.push_back({.name = "tp2_pp2_dp2_layer_tp", .tp = 2, .pp = 2, .dp = 2, .edit_plan = [](Plan& p, int layers) {
                 p.layers.assign(static_cast<size_t>(layers), LayerSetting{});
                 p.layers[3].tp = 1;
                 p.layers[4].tp = 1;
               }});
  // Replicas on devices out of the default order (reversed).
  v.push_back({.name = "tp2_pp2_dp2_reversed_devices", .tp = 2, .pp = 2, .dp = 2, .edit_plan = [](Plan& p, int) {
                 for (Stage& s : p.stages) {
                   for (StageReplica& r : s.replicas) {
                     for (DeviceId& d : r.devices) d = 7 - d;
                   }
                 }
               }});
  // Not alike: the walk builds every replica.
  v.push_back({.name = "dp2_zero3", .dp = 2, .zero_stage = 3, .copied = false});
  v.push_back({.name = "dp2_zero1_gather_overlap", .dp = 2, .iterations = 2, .zero_stage = 1, .copied = false,
               .edit_options = [](ExpandOptions& o) { o.param_gather_overlap = true; }});
  v.push_back({.name = "pp2_dp2_uneven_micro_batches", .pp = 2, .dp = 2, .copied = false, .edit_plan = [](Plan& p, int) {
                 for (Stage& s : p.stages) s.replicas[1].micro_batches = 2;
               }});
  v.push_back({.name = "one_replica", .tp = 2, .pp = 2, .dp = 1, .copied = false});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Plans, ReplicaCopy, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
}  // namespace testbed::testing
