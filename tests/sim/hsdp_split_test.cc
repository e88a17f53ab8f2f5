// HSDP in the schedule: under ZeRO-3 with a split of the weights over link classes
// (Plan::param_links), each layer's all-gathers and each bucket's reduce-scatter become one
// collective per class, pinned to it, on the class's own streams, with bytes in proportion to
// the shares. On two devices joined by NVLink and by PCIe, one layer without compute runs
// three collectives on each class at once (forward gather, backward gather, gradient
// reduce-scatter), so the iteration takes 3 x the slower class's piece: the closed form.
#include <gtest/gtest.h>

#include <map>

#include "ring.h"
#include "sim/simulator.h"
#include "sim_fixtures.h"
#include "testbed/pipeline_program.h"

namespace testbed::testing {
namespace {

constexpr double kNvBw = 50e9, kNvLat = 1e-6, kPcieBw = 10e9, kPcieLat = 2e-6;
constexpr LinkKinds kNv = LinkKindBit(LinkKind::kNvlink), kPcie = LinkKindBit(LinkKind::kPcie);

struct Ran {
  Schedule schedule;
  SimResult result;
};

Ran RunSplit(const ModelGraph& model, const LinkClassSplit& split) {
  const Cluster cluster = BridgedPairs(BridgedPairsSpec{1, 1, kNvBw, kNvLat, kPcieBw, kPcieLat});
  GridSpec g;
  g.dp = 2;
  g.zero_stage = 3;
  g.chunks = {StageSpec{0, static_cast<int>(model.layers.size()), 0}};
  Plan plan = GridPlan(g);
  plan.param_links = split;
  EXPECT_TRUE(plan.Validate(static_cast<int>(model.layers.size()), cluster).ok());
  TrainSettings train;
  train.optimizer_step = false;
  const ConstantDeviceModel dm(0);
  const collectives::Ring ring(collectives::CommTuning{});
  SchedulingContext ctx{model, cluster, plan, train, dm, nullptr, nullptr, 1};
  auto s = ExpandPipeline(ctx, OneFOneBProgram(1, 1), ExpandOptions{});
  EXPECT_TRUE(s.ok() && s->Check().ok()) << (s.ok() ? s->Check() : s.status());
  if (!s.ok()) return {};
  auto r = Simulate(*s, SimInputs{model, cluster, dm, ring}, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return {std::move(*s), r.ok() ? std::move(*r) : SimResult{}};
}

TEST(HsdpSplit, EachCollectiveBecomesOnePinnedPiecePerClass) {
  const std::int64_t params = 30'000'000;
  const ModelGraph model = MeasuredLayers(1, 0, 0, params);
  const double x = 0.75;
  const Ran r = RunSplit(model, LinkClassSplit{{kNv, kPcie}, {{x, 1 - x}}});
  std::map<std::pair<std::uint8_t, LinkKinds>, std::vector<std::int64_t>> seen;  // (stream, links) -> bytes
  for (const Task& t : r.schedule.tasks()) {
    if (t.kind == TaskKind::kCollective) seen[{t.stream, t.links}].push_back(t.bytes);
  }
  const double bytes = 2.0 * params;  // fp16 weights and gradients
  using Key = std::pair<std::uint8_t, LinkKinds>;
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[Key(streams::kParamComm, kNv)], (std::vector<std::int64_t>(2, static_cast<std::int64_t>(x * bytes))));
  EXPECT_EQ(seen[Key(streams::kParamComm2, kPcie)],
            (std::vector<std::int64_t>(2, static_cast<std::int64_t>((1 - x) * bytes))));
  EXPECT_EQ(seen[Key(streams::kDataComm, kNv)], std::vector<std::int64_t>{static_cast<std::int64_t>(x * bytes)});
  EXPECT_EQ(seen[Key(streams::kDataComm2, kPcie)], std::vector<std::int64_t>{static_cast<std::int64_t>((1 - x) * bytes)});
}

TEST(HsdpSplit, TwoClassesAtOnceMatchTheClosedForm) {
  const std::int64_t params = 30'000'000;
  const double bytes = 2.0 * params;
  const ModelGraph model = MeasuredLayers(1, 0, 0, params);
  auto piece = [&](double share, double bw, double lat) { return share * bytes / 2 / bw + lat; };
  for (double x : {1.0, 5.0 / 6, 0.75, 0.5}) {
    const Ran r = RunSplit(model, LinkClassSplit{{kNv, kPcie}, {{x, 1 - x}}});
    const double nv = piece(x, kNvBw, kNvLat);
    const double pcie = x < 1 ? piece(1 - x, kPcieBw, 2 * kPcieLat) : 0.0;
    EXPECT_NEAR(r.result.iteration_time_s, 3 * std::max(nv, pcie), 1e-9) << "x = " << x;
  }
  // Without a split: ZeRO-3 on the cluster's own route (the bridge), three collectives.
  const Ran plain = RunSplit(model, LinkClassSplit{});
  EXPECT_NEAR(plain.result.iteration_time_s, 3 * piece(1, kNvBw, kNvLat), 1e-9);
  // The split at the bandwidth ratio beats it.
  const Ran best = RunSplit(model, LinkClassSplit{{kNv, kPcie}, {{5.0 / 6, 1.0 / 6}}});
  EXPECT_LT(best.result.iteration_time_s, plain.result.iteration_time_s / 1.15);
}

TEST(HsdpSplit, TheSplitNeedsZeroThreeAndSharesThatSumToOne) {
  const Cluster cluster = BridgedPairs(BridgedPairsSpec{});
  GridSpec g;
  g.dp = 2;
  g.chunks = {StageSpec{0, 1, 0}};
  Plan plan = GridPlan(g);
  plan.param_links = LinkClassSplit{{kNv, kPcie}, {{0.5, 0.5}}};
  EXPECT_NE(plan.Validate(1, cluster).message().find("needs zero_stage = 3"), std::string::npos);
  plan.zero_stage = 3;
  EXPECT_TRUE(plan.Validate(1, cluster).ok());
  plan.param_links.shares = {{0.5, 0.6}};
  EXPECT_NE(plan.Validate(1, cluster).message().find("summing to 1"), std::string::npos);
  plan.param_links.shares = {{0.5, 0.5}, {1, 0}};
  EXPECT_NE(plan.Validate(1, cluster).message().find("given for 2 of 1 layers"), std::string::npos);
  plan.param_links = LinkClassSplit{{kNv, kPcie, 0}, {{0.5, 0.25, 0.25}}};
  EXPECT_NE(plan.Validate(1, cluster).message().find("at most 2"), std::string::npos);
}

}  // namespace
}  // namespace testbed::testing
