// AutoPipe-H's device mapping on small heterogeneous clusters: with one GPU twice as fast as
// the other, the balanced sub-layer split gives it two thirds of the work (closed form); on
// two servers of each kind the fastest-first mapping beats the cluster's order when the slow
// servers come first; every stage of the result costs within a sub-layer of the mean on its
// own device; bad degrees are named.
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "autopipe_h_partitioner.h"
#include "hetero_mapping.h"
#include "sim_fixtures.h"

namespace testbed::autopipe {
namespace {


NodeType Server(const std::string& kind, int devices) {
  NodeType type;
  type.name = kind + "-server";
  type.devices = devices;
  type.device.name = kind;
  type.device.peak_flops[Precision::kFp16] = 100e12;
  type.device.peak_flops[Precision::kFp32] = 10e12;
  type.device.memory_bytes = std::int64_t{80} << 30;
  type.device.memory_bandwidth_bytes_per_s = 1e12;
  type.hubs = {"cpu0"};
  type.nics = {"nic0"};
  const LinkSpec pcie{"pcie", LinkKind::kPcie, 16e9, 1e-6};
  for (int i = 0; i < devices; ++i) type.links.push_back({absl::StrCat("gpu", i), "cpu0", pcie});
  type.links.push_back({"nic0", "cpu0", pcie});
  type.nic_link = LinkSpec{"ib", LinkKind::kInfiniband, 12.5e9, 2e-6};
  return type;
}

struct World {
  ModelGraph model = testing::Gpt(6);
  Cluster cluster;
  testing::SpeedDeviceModel dm{1e-3, {{"fast", 2.0}, {"slow", 1.0}}};
  TrainSettings train;
  ParallelSettings parallel;
  PlanningContext ctx{model, cluster, train, parallel, dm, 0, {}};
  explicit World(std::vector<NodeGroup> groups, int pp)
      : cluster(*Cluster::Build("mixed", std::move(groups))) {
    train.global_batch = 8;
    train.micro_batch = 1;
    parallel.pp = pp;
  }
};

TEST(AutoPipeH, AGpuTwiceAsFastTakesTwoThirdsOfTheWork) {
  World w({NodeGroup{Server("slow", 1), 1}, NodeGroup{Server("fast", 1), 1}}, 2);
  std::vector<HeteroMapping> all;
  auto best = MapHeterogeneous(w.ctx, 2, 1, 8, &all);
  ASSERT_TRUE(best.ok()) << best.status();
  // 12 sub-layers of 3 ms (forward + backward) at speed 1: in every mapping the fast GPU's
  // stage takes 8 of them (8 x 1.5 ms = 12 ms) and the slow one's 4 (12 ms), whichever runs
  // first. Embedding and head are free items.
  for (const HeteroMapping& m : all) {
    ASSERT_EQ(m.stages.size(), 2u);
    for (int s = 0; s < 2; ++s) {
      const bool fast = w.cluster.spec_of(m.device_map[static_cast<size_t>(s)]).name == "fast";
      int sublayers = 0;
      for (int l = m.stages[static_cast<size_t>(s)].first_layer; l < m.stages[static_cast<size_t>(s)].end_layer; ++l) {
        const LayerKind k = w.model.layers[static_cast<size_t>(l)].kind;
        sublayers += k == LayerKind::kAttention || k == LayerKind::kMlp ? 1 : 0;
      }
      EXPECT_EQ(sublayers, fast ? 8 : 4) << m.name << " stage " << s;
    }
  }
}

TEST(AutoPipeH, FastestServersFirstBeatTheClusterOrderAndStagesAreBalanced) {
  World w({NodeGroup{Server("slow", 2), 2}, NodeGroup{Server("fast", 2), 2}}, 4);
  std::vector<HeteroMapping> all;
  auto best = MapHeterogeneous(w.ctx, 4, 2, 4, &all);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_EQ(all.size(), 3u);
  double cluster_order = 0;
  for (const HeteroMapping& m : all) {
    if (m.name == "cluster") cluster_order = m.predicted_s;
  }
  EXPECT_LE(best->predicted_s, cluster_order);
  AutoPipeHPartitioner p;
  auto plan = p.Partition(w.ctx);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Each stage's forward + backward per micro-batch on its own (slowest) device: within one
  // sub-layer's time on the slow kind (3 ms) of the mean.
  std::vector<double> t;
  for (int s = 0; s < plan->pp(); ++s) {
    double speed = 1e9;
    for (int d = 0; d < plan->dp(s); ++d) speed = std::min(speed, w.cluster.spec_of(plan->DeviceOf(d, s, 0)).name == "fast" ? 2.0 : 1.0);
    const StageSpec& st = plan->Chunk(s, 0);
    int layers = 0;
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      const LayerKind k = w.model.layers[static_cast<size_t>(l)].kind;
      layers += k == LayerKind::kAttention || k == LayerKind::kMlp ? 1 : 0;
    }
    t.push_back(layers * 3e-3 / speed);
  }
  double mean = 0;
  for (double x : t) mean += x / static_cast<double>(t.size());
  for (double x : t) EXPECT_LE(x - mean, 3e-3 + 1e-12);
  EXPECT_GT(plan->planner_metrics.Find("autopipe_h_candidates")->value, 0);
}

TEST(AutoPipeH, BadDegreesAreNamed) {
  World w({NodeGroup{Server("slow", 2), 1}, NodeGroup{Server("fast", 2), 1}}, 3);
  AutoPipeHPartitioner p;
  auto plan = p.Partition(w.ctx);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("must equal the 4 devices of cluster 'mixed'"), std::string::npos)
      << plan.status();
  w.parallel.pp = 2;
  w.parallel.tp = 2;
  plan = p.Partition(w.ctx);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("tp must be 1, got 2"), std::string::npos) << plan.status();
}

}  // namespace
}  // namespace testbed::autopipe
