// HPH against hand-worked cases: the topology designer's two mappings and their
// communication (two nodes of two devices, fast links inside a node and a slow NIC); the
// partition gives a slow, small-memory stage fewer layers and recomputes only where the
// layers do not fit otherwise; moving the recomputation into the bubbles is never slower than
// Megatron-LM's recompute-after-gradient and never faster than no recomputation, and the
// program has one recompute before each backward of the recomputing stages only.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "hph_partition.h"
#include "hph_partitioner.h"
#include "hph_scheduler.h"
#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"

namespace testbed::hph {
namespace {

constexpr double kInBw = 100e9, kInLat = 1e-6, kNicBw = 5e9, kNicLat = 2e-6;


NodeType Node(const std::string& kind, int devices, double memory_gib) {
  NodeType type;
  type.name = kind + "-node";
  type.devices = devices;
  type.device.name = kind;
  type.device.peak_flops[Precision::kFp32] = 10e12;
  type.device.peak_flops[Precision::kFp16] = 100e12;
  type.device.memory_bytes = static_cast<std::int64_t>(memory_gib * 1073741824.0);
  type.device.memory_bandwidth_bytes_per_s = 1e12;
  type.hubs = {"switch"};
  type.nics = {"nic0"};
  const LinkSpec in{"in", LinkKind::kPcie, kInBw, kInLat};
  for (int i = 0; i < devices; ++i) type.links.push_back({absl::StrCat("gpu", i), "switch", in});
  type.links.push_back({"nic0", "switch", in});
  type.nic_link = LinkSpec{"nic", LinkKind::kInfiniband, kNicBw, kNicLat};
  return type;
}

struct World {
  ModelGraph model = testing::Gpt(6);
  Cluster cluster;
  testing::SpeedDeviceModel dm;
  TrainSettings train;
  ParallelSettings parallel;
  std::unique_ptr<PlanningContext> ctx;
  World(std::vector<NodeGroup> groups, std::map<std::string, double> speed, std::int64_t global_batch)
      : cluster(*Cluster::Build("mixed", std::move(groups))), dm(1e-3, std::move(speed)) {
    train.global_batch = global_batch;
    train.micro_batch = 1;
    ctx = std::make_unique<PlanningContext>(PlanningContext{model, cluster, train, parallel, dm, 0, {}});
  }
};

TEST(HphTopology, TheDesignerWeighsBothMappingsByHand) {
  // Two nodes of two devices (fast kind a on node 0, b on node 1): devices 0, 1 | 2, 3.
  World w({NodeGroup{Node("a", 2, 80), 1}, NodeGroup{Node("b", 2, 80), 1}}, {{"a", 2.0}, {"b", 1.0}}, 8);
  Profiles profiles(*w.ctx, 1);
  auto order = SpeedOrder(profiles, w.cluster);
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(*order, (std::vector<DeviceId>{0, 1, 2, 3}));
  const std::vector<Mapping> maps = Mappings(*order, 2, 2);
  ASSERT_EQ(maps.size(), 2u);
  // Stage-major: stage 0 on devices {0, 1} (node 0), stage 1 on {2, 3}. Pipeline-major:
  // replica 0 = {0, 1}, replica 1 = {2, 3}, so stage 0 on {0, 2}.
  EXPECT_EQ(maps[0].At(0, 1), 1);
  EXPECT_EQ(maps[0].At(1, 0), 2);
  EXPECT_EQ(maps[1].At(0, 1), 2);
  EXPECT_EQ(maps[1].At(1, 0), 1);
  const double A = 1e6, G = 64e6;  // activation per micro-batch, gradients per stage
  const double cross = 4 * kInLat + 2 * kNicLat + A / kNicBw;  // gpu > switch > nic > nic > switch > gpu
  const double inside = 2 * kInLat + A / kInBw;
  const CommCost stage_major = CommTime(maps[0], w.cluster, {A}, {G, G});
  EXPECT_NEAR(stage_major.per_micro_batch_s, 2 * cross, 1e-15);
  EXPECT_NEAR(stage_major.all_reduce_s, G / kInBw, 1e-15);  // 2(2-1)/2 G over the switch
  const CommCost pipeline_major = CommTime(maps[1], w.cluster, {A}, {G, G});
  EXPECT_NEAR(pipeline_major.per_micro_batch_s, 2 * inside, 1e-15);
  EXPECT_NEAR(pipeline_major.all_reduce_s, G / kNicBw, 1e-15);
  // With 4 micro-batches per replica: 8 crossings of 1 MB against one 64 MB all-reduce over
  // the NIC, so the stage-major mapping communicates less.
  EXPECT_LT(stage_major.PerIteration(4), pipeline_major.PerIteration(4));
}

TEST(HphPartition, ASmallSlowStageTakesFewerLayersAndRecomputesOnlyWhenItMustFit) {
  // Stage 0 on a fast 80 GiB device, stage 1 on a device twice as slow. 6 blocks, 8
  // micro-batches.
  World roomy({NodeGroup{Node("a", 1, 80), 1}, NodeGroup{Node("b", 1, 80), 1}}, {{"a", 2.0}, {"b", 1.0}}, 8);
  Profiles p1(*roomy.ctx, 1);
  auto order = SpeedOrder(p1, roomy.cluster);
  ASSERT_TRUE(order.ok());
  auto part = PartitionLayers(*roomy.ctx, p1, Mappings(*order, 2, 1)[0], 8);  // one replica: all 8
  ASSERT_TRUE(part.ok() && part->has_value());
  EXPECT_EQ((*part)->units, (std::vector<int>{5, 3}));  // 4 blocks at half the time, 2 blocks
  EXPECT_EQ((*part)->recompute, (std::vector<bool>{false, false}));
  // 1F1B estimate: both stages 12 ms per micro-batch; (8 + 1) x 12 ms plus the transfers.
  EXPECT_NEAR((*part)->estimate_s, 9 * 12e-3, 2e-3);
  // The fast device with 1.4 GiB: its 4 blocks need 0.81 GB of weights and state (12.6 M
  // parameters x 16 B each) and, for the 2 micro-batches 1F1B keeps in flight on the first
  // stage, 2 x 4 x 0.12 GB of activations (1.77 GB): they fit only as checkpoints (2 MB per
  // block and micro-batch) with one micro-batch rebuilt (1.30 GB). Recomputing, its 16 ms per
  // micro-batch still beat the 18 ms the slow device would take with 3 blocks, so the split
  // stays 5 | 3 and only stage 0 recomputes.
  World tight({NodeGroup{Node("a", 1, 1.4), 1}, NodeGroup{Node("b", 1, 80), 1}}, {{"a", 2.0}, {"b", 1.0}}, 8);
  Profiles p2(*tight.ctx, 1);
  auto order2 = SpeedOrder(p2, tight.cluster);
  ASSERT_TRUE(order2.ok());
  auto part2 = PartitionLayers(*tight.ctx, p2, Mappings(*order2, 2, 1)[0], 8);
  ASSERT_TRUE(part2.ok() && part2->has_value());
  EXPECT_EQ((*part2)->units, (std::vector<int>{5, 3}));
  EXPECT_EQ((*part2)->recompute, (std::vector<bool>{true, false}));
}

absl::StatusOr<double> Simulated(const World& w, const Plan& plan, Scheduler& scheduler) {
  SchedulingContext sc{w.model, w.cluster, plan, w.train, w.dm};
  auto s = scheduler.BuildSchedule(sc);
  if (!s.ok()) return s.status();
  collectives::Ring ring(collectives::CommTuning{});
  auto r = Simulate(*s, SimInputs{w.model, w.cluster, w.dm, ring}, SimOptions{});
  if (!r.ok()) return r.status();
  return r->iteration_time_s;
}

TEST(HphSchedule, RecomputationInTheBubblesLiesBetweenNoneAndAfterTheGradient) {
  World w({NodeGroup{Node("a", 1, 80), 1}, NodeGroup{Node("b", 1, 80), 1}}, {{"a", 1.0}, {"b", 1.0}}, 8);
  Plan plan = testing::UniformPlan(w.model, 1, 2, 1, 1, 8);
  // Stage 0 recomputes fully; stage 1 does not.
  StageSpec& s0 = plan.stages[0].chunks[0];
  s0.recompute_layers = s0.end_layer - s0.first_layer;
  plan.recompute = RecomputeMode::kFull;
  const PipelineProgram program = RecomputeInBubbles(2, 8, {true, false});
  ASSERT_TRUE(CheckProgram(program, 2, 1, 8).ok());
  int recomputes0 = 0, recomputes1 = 0;
  for (const PipelineOp& op : program.stages[0]) recomputes0 += op.kind == PipelineOp::Kind::kRecompute;
  for (const PipelineOp& op : program.stages[1]) recomputes1 += op.kind == PipelineOp::Kind::kRecompute;
  EXPECT_EQ(recomputes0, 8);
  EXPECT_EQ(recomputes1, 0);
  ExpandOptions after;
  after.recompute_after_gradient = true;
  HphScheduler hph(ExpandOptions{});
  auto in_bubbles = Simulated(w, plan, hph);
  ASSERT_TRUE(in_bubbles.ok()) << in_bubbles.status();
  // The baseline: 1F1B whose recomputation starts once the gradient has arrived.
  class AfterGradient final : public Scheduler {
   public:
    explicit AfterGradient(ExpandOptions o) : o_(o) {}
    absl::StatusOr<Schedule> BuildSchedule(const SchedulingContext& ctx) override {
      return ExpandOneFOneB(ctx, o_, "1f1b");
    }
    ExpandOptions o_;
  } baseline(after);
  auto waiting = Simulated(w, plan, baseline);
  ASSERT_TRUE(waiting.ok());
  Plan none = plan;
  none.stages[0].chunks[0].recompute_layers = 0;
  none.recompute = RecomputeMode::kNone;
  auto free_of_it = Simulated(w, none, baseline);
  ASSERT_TRUE(free_of_it.ok());
  // 6 blocks over 2 stages: 3 blocks each, 3 ms forward and 6 ms backward per micro-batch;
  // stage 0's recomputation adds 3 ms. After the gradient it sits on every steady cycle
  // (stage 0 then paces the pipeline at 12 ms); in the bubbles it hides where stage 0 waits.
  EXPECT_LT(*in_bubbles, *waiting - 1e-3);
  EXPECT_GE(*in_bubbles, *free_of_it - 1e-12);
  std::printf("[ hph ] no recompute %.4f s, in the bubbles %.4f s, after the gradient %.4f s\n", *free_of_it, *in_bubbles,
              *waiting);
}

}  // namespace
}  // namespace testbed::hph
