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
  std::int64_t micro_batch = 1;
};

absl::StatusOr<Plan> BuildPlan(const PlanningContext& ctx, const Candidate& c) {
  Plan plan;
  plan.micro_batch = c.micro_batch;
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
      st.replicas.push_back(StageReplica{{d}, c.partition.micro_batches[static_cast<size_t>(r)], 0});
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
  if (ctx.train.global_batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("hph: [train] global_batch (", ctx.train.global_batch,
                                                   ") must be positive: HPH shares an iteration's samples out"));
  }
  std::vector<Candidate> pool;
  int considered = 0;
  // Micro-batch sizes in powers of two dividing the batch, up to [train] micro_batch's limit
  // of 16 sequences, as the searching baselines try them.
  for (std::int64_t mb = 1; mb <= std::max<std::int64_t>(16, ctx.train.micro_batch); mb *= 2) {
    if (ctx.train.global_batch % mb != 0) continue;
    const std::int64_t total = ctx.train.global_batch / mb;
    Profiles profiles(ctx, mb);
    TESTBED_ASSIGN_OR_RETURN(std::vector<DeviceId> order, SpeedOrder(profiles, ctx.cluster));
    for (int pp = 1; pp <= std::min(devices, profiles.num_units()); ++pp) {
      if (devices % pp != 0) continue;
      const int dp = devices / pp;
      if (total < dp) continue;
      // The topology designer's mappings, each with its own partition; the estimate (compute
      // and the mapping's communication) ranks them with every other depth's.
      std::vector<Mapping> mappings = Mappings(order, pp, dp);
      if (!options_.design_topology) mappings.resize(1);
      ++considered;
      for (const Mapping& mp : mappings) {
        TESTBED_ASSIGN_OR_RETURN(auto part, PartitionLayers(ctx, profiles, mp, static_cast<int>(total)));
        if (part.has_value()) pool.push_back(Candidate{mp, std::move(*part), mb});
      }
    }
  }
  if (pool.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat("hph: no pipeline depth and micro-batch size on ", devices,
                                                     " devices (", considered, " tried) splits model '",
                                                     ctx.model.shape.name,
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
