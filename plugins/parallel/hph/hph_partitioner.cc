#include "hph_partitioner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "hph_partition.h"
#include "testbed/memory_model.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::hph {
namespace {

struct Candidate {
  Mapping mapping;
  Partition partition;
  int m = 1;
};

absl::StatusOr<Plan> BuildPlan(const PlanningContext& ctx, const Candidate& c) {
  Plan plan;
  plan.micro_batch = ctx.train.micro_batch;
  plan.zero_stage = ctx.parallel.zero_stage;
  const std::vector<StageSpec> specs = StagesFromUnitCounts(ctx.model, c.partition.units);
  bool any = false;
  for (int s = 0; s < c.mapping.pp; ++s) {
    Stage st;
    st.chunks = {specs[static_cast<size_t>(s)]};
    StageSpec& chunk = st.chunks.front();
    chunk.recompute_layers = c.partition.recompute[static_cast<size_t>(s)] ? chunk.end_layer - chunk.first_layer : 0;
    any = any || c.partition.recompute[static_cast<size_t>(s)];
    st.tp = 1;
    std::string kind = ctx.cluster.spec_of(c.mapping.At(s, 0)).name;
    for (int r = 0; r < c.mapping.dp; ++r) {
      const DeviceId d = c.mapping.At(s, r);
      if (ctx.cluster.spec_of(d).name != kind) kind.clear();  // a stage of mixed kinds
      st.replicas.push_back(StageReplica{{d}, c.m, 0});
    }
    st.device_type = kind;
    plan.stages.push_back(std::move(st));
  }
  plan.recompute = any ? RecomputeMode::kFull : RecomputeMode::kNone;
  TESTBED_RETURN_IF_ERROR(plan.Validate(static_cast<int>(ctx.model.layers.size()), ctx.cluster));
  int recomputing = 0;
  for (bool r : c.partition.recompute) recomputing += r ? 1 : 0;
  plan.planner_metrics.Add("hph_estimated_iteration_s", c.partition.estimate_s, "s");
  plan.planner_metrics.Add("hph_comm_s", c.partition.comm_s, "s");
  plan.planner_metrics.Add("hph_stage_major", c.mapping.stage_major ? 1 : 0, "1");
  plan.planner_metrics.Add("hph_recompute_stages", recomputing, "stages");
  return plan;
}

}  // namespace

absl::StatusOr<Plan> HphPartitioner::Partition(const PlanningContext& ctx) {
  const int devices = ctx.cluster.num_devices();
  if (ctx.train.global_batch <= 0 || ctx.train.global_batch % ctx.train.micro_batch != 0) {
    return absl::InvalidArgumentError(absl::StrCat("hph: [train] global_batch (", ctx.train.global_batch,
                                                   ") must be a positive multiple of micro_batch (",
                                                   ctx.train.micro_batch, ")"));
  }
  const std::int64_t total = ctx.train.global_batch / ctx.train.micro_batch;
  Profiles profiles(ctx);
  TESTBED_ASSIGN_OR_RETURN(std::vector<DeviceId> order, SpeedOrder(profiles, ctx.cluster));
  const double grad_per_param = BytesPerElement(StoragePrecision(ctx.train.precision));
  std::vector<Candidate> pool;
  int considered = 0;
  for (int pp = 1; pp <= std::min(devices, profiles.num_units()); ++pp) {
    if (devices % pp != 0) continue;
    const int dp = devices / pp;
    if (total % dp != 0) continue;
    const int m = static_cast<int>(total / dp);
    // The topology designer: the mapping with the least communication, weighed on the
    // stage-major mapping's partition (the traffic hardly depends on the split).
    std::vector<Mapping> mappings = Mappings(order, pp, dp);
    if (!options_.design_topology) mappings.resize(1);
    TESTBED_ASSIGN_OR_RETURN(auto first, PartitionLayers(ctx, profiles, mappings.front(), m));
    const Mapping* chosen = &mappings.front();
    if (first.has_value() && mappings.size() > 1) {
      TESTBED_ASSIGN_OR_RETURN(const std::vector<UnitProfile>* units, profiles.Of(order.front()));
      std::vector<double> boundary, grads;
      TrafficOf(*units, first->units, grad_per_param, boundary, grads);
      double best = -1;
      for (const Mapping& mp : mappings) {
        const double c = CommTime(mp, ctx.cluster, boundary, grads).PerIteration(m);
        if (best < 0 || c < best) {
          best = c;
          chosen = &mp;
        }
      }
    }
    ++considered;
    TESTBED_ASSIGN_OR_RETURN(auto part, PartitionLayers(ctx, profiles, *chosen, m));
    if (!part.has_value()) continue;
    pool.push_back(Candidate{*chosen, std::move(*part), m});
  }
  if (pool.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat("hph: no pipeline depth of ", devices, " devices (", considered,
                                                     " tried) splits model '", ctx.model.shape.name,
                                                     "' so that every stage fits, even with recomputation"));
  }
  std::sort(pool.begin(), pool.end(),
            [](const Candidate& a, const Candidate& b) { return a.partition.estimate_s < b.partition.estimate_s; });
  if (static_cast<int>(pool.size()) > options_.finalists) pool.resize(static_cast<size_t>(options_.finalists));
  std::optional<Plan> best;
  double best_throughput = -1;
  std::string reason;
  for (const Candidate& c : pool) {
    TESTBED_ASSIGN_OR_RETURN(Plan plan, BuildPlan(ctx, c));
    if (!ctx.evaluate) return plan;  // no simulator: the estimate's best
    auto metrics = ctx.evaluate(plan);
    if (!metrics.ok()) {
      if (reason.empty()) reason = std::string(metrics.status().message());
      continue;
    }
    const Metric* thr = metrics->Find("throughput_samples_per_s");
    if (thr != nullptr && thr->value > best_throughput * (1 + 1e-9)) {
      best_throughput = thr->value;
      best = std::move(plan);
    }
  }
  if (!best.has_value()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("hph: none of the ", pool.size(), " best plans runs in the simulator; the first: ", reason));
  }
  best->planner_metrics.Add("hph_depths_considered", considered, "plans");
  return std::move(*best);
}

}  // namespace testbed::hph
