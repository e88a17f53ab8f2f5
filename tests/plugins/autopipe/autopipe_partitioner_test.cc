// The partitioner: a valid plan whose stages are AutoPipe's partition of the device model's
// sub-layer costs; sub-layer granularity never balances worse than whole blocks.
#include <gtest/gtest.h>

#include <algorithm>

#include "autopipe_partitioner.h"
#include "balanced_partition.h"
#include "layer_times.h"
#include "sim_fixtures.h"

namespace testbed::autopipe {
namespace {

// Attention, MLP, embedding and head with different costs (backward twice forward), so that
// sub-layer boundaries matter.
class KindDeviceModel final : public DeviceModel {
 public:
  absl::StatusOr<double> ComputeLayerTime(const LayerWork& w, const DeviceSpec&) const override {
    double t = 0;
    switch (w.layer->kind) {
      case LayerKind::kEmbedding: t = 0.2; break;
      case LayerKind::kAttention: t = 1.0; break;
      case LayerKind::kMlp: t = 1.7; break;
      case LayerKind::kHead: t = 3.1; break;
      default: t = 1.0;
    }
    t *= w.fraction * static_cast<double>(w.micro_batch) / w.tp;
    return w.phase == Phase::kBackward ? 2 * t : t;
  }
  absl::StatusOr<double> KernelTime(double, double, Precision, const DeviceSpec&) const override { return 0.0; }
};

double MaxStageLoad(const ModelGraph& model, const Plan& plan, const KindDeviceModel& dm, const DeviceSpec& dev) {
  double worst = 0;
  for (const StageSpec& st : plan.Chunks()) {
    double load = 0;
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      LayerWork w{&model.layers[static_cast<size_t>(l)], Phase::kForward, 1, 1, false, Precision::kFp16, 1.0, false};
      load += 3 * *dm.LayerTime(w, dev);
    }
    worst = std::max(worst, load);
  }
  return worst;
}

TEST(AutoPipePartitioner, ReturnsAValidPlanOfItsPartition) {
  const ModelGraph model = testing::Gpt(12, 256, 128);
  const Cluster cluster = testing::StarCluster(8, 1e10, 1e-6);
  KindDeviceModel dm;
  TrainSettings train;
  train.micro_batches = 8;
  for (int pp : {2, 4, 8}) {
    ParallelSettings parallel;
    parallel.pp = pp;
    PlanningContext ctx{model, cluster, train, parallel, dm, 1, {}};
    AutoPipePartitioner ap(AutoPipeOptions{});
    auto plan = ap.Partition(ctx);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(plan->Validate(static_cast<int>(model.layers.size()), cluster).ok());
    EXPECT_EQ(plan->pp(), pp);
    auto times = SubLayerTimes(model, dm, cluster.spec_of(0), 1, 1, false, Precision::kFp16);
    ASSERT_TRUE(times.ok());
    auto part = PlanPartition(times->fwd, times->bwd, pp);
    ASSERT_TRUE(part.ok());
    const std::vector<StageSpec> want = StagesFromCounts(*times, part->counts);
    ASSERT_EQ(plan->Chunks().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(plan->Chunks()[i].first_layer, want[i].first_layer);
      EXPECT_EQ(plan->Chunks()[i].end_layer, want[i].end_layer);
    }
  }
}

TEST(AutoPipePartitioner, SubLayersBalanceAtLeastAsWellAsBlocks) {
  const ModelGraph model = testing::Gpt(10, 256, 128);
  const Cluster cluster = testing::StarCluster(8, 1e10, 1e-6);
  KindDeviceModel dm;
  TrainSettings train;
  train.micro_batches = 8;
  for (int pp = 2; pp <= 8; ++pp) {
    ParallelSettings parallel;
    parallel.pp = pp;
    parallel.dp = 1;
    PlanningContext ctx{model, cluster, train, parallel, dm, 1, {}};
    AutoPipeOptions sub, block;
    sub.heuristic = block.heuristic = false;  // the dynamic programme: pure min-max
    block.sublayers = false;
    auto a = AutoPipePartitioner(sub).Partition(ctx);
    auto b = AutoPipePartitioner(block).Partition(ctx);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_LE(MaxStageLoad(model, *a, dm, cluster.spec_of(0)), MaxStageLoad(model, *b, dm, cluster.spec_of(0)) + 1e-12)
        << "pp=" << pp;
  }
}

}  // namespace
}  // namespace testbed::autopipe
