#include "recompute_choice.h"

#include "testbed/plan_search.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "stage_aware_recompute.h"
#include "testbed/memory_model.h"
#include "testbed/status_macros.h"

namespace testbed::merak {
namespace {

std::vector<double> RatiosFor(RecomputePolicy policy, double r0, int pp, bool shifted) {
  if (policy == RecomputePolicy::kNone) return std::vector<double>(static_cast<size_t>(pp), 0.0);
  std::vector<double> r = policy == RecomputePolicy::kStageAware ? StageAwareRatios(r0, pp) : UniformRatios(r0, pp);
  if (shifted) ShiftAdjust(r);
  return r;
}

bool EstimateFits(const PlanningContext& ctx, const Plan& plan, bool shifted) {
  for (int s = 0; s < plan.pp(); ++s) {
    const double need = StagePeakBytes(plan, ctx.model, ctx.train, s, InFlight(plan, s, shifted));
    if (need > static_cast<double>(ctx.cluster.spec_of(plan.DeviceOf(0, s, 0)).memory_bytes)) return false;
  }
  return true;
}

}  // namespace

double StagePeakBytes(const Plan& plan, const ModelGraph& model, const TrainSettings& train, int stage, int in_flight) {
  double bytes = StaticBytes(StageParams(plan, model, stage), train.precision, train.optimizer, plan.zero_stage, plan.dp(0))
                     .total();
  const double mb = static_cast<double>(plan.micro_batch);
  const bool selective = plan.recompute == RecomputeMode::kSelective;
  for (int c = 0; c < plan.virtual_stages(); ++c) {
    const StageSpec& st = plan.Chunk(stage, c);
    double kept = 0, full = 0;
    for (int l = st.first_layer; l < st.end_layer; ++l) {
      const Layer& layer = model.layers[static_cast<size_t>(l)];
      const double act = ActivationBytes(layer, mb, plan.tp(0), plan.sequence_parallel, selective);
      full += act;
      kept += l - st.first_layer < st.recompute_layers ? CheckpointBytes(layer, mb, plan.tp(0), plan.sequence_parallel)
                                                       : act;
    }
    bytes += full + static_cast<double>(std::max(0, in_flight - 1)) * kept;
  }
  return bytes;
}

int InFlight(const Plan& plan, int stage, bool shifted) {
  int n = plan.pp() - stage;
  if (shifted && plan.pp() >= 2 && stage == plan.pp() - 2) n = 3;
  return static_cast<int>(std::min<std::int64_t>(n, plan.MicroBatches(0, 0)));
}


absl::StatusOr<RecomputeChoice> ChooseRecompute(const PlanningContext& ctx, Plan& plan, RecomputePolicy policy,
                                                bool shifted, const Evaluate& evaluate) {
  const int n0 = plan.Chunk(0, 0).end_layer - plan.Chunk(0, 0).first_layer;
  // Candidate ratios in whole layers of the first stage; with no recomputation asked for,
  // only r0 = 0.
  const int steps = policy == RecomputePolicy::kNone ? 0 : n0;
  int k = 0;
  for (; k < steps; ++k) {
    ApplyRatios(plan, RatiosFor(policy, static_cast<double>(k) / n0, plan.pp(), shifted));
    if (EstimateFits(ctx, plan, shifted)) break;
  }
  RecomputeChoice choice;
  absl::Status last = absl::OkStatus();
  for (; k <= steps; ++k) {
    choice.r0 = steps == 0 ? 0.0 : static_cast<double>(k) / n0;
    choice.ratios = RatiosFor(policy, choice.r0, plan.pp(), shifted);
    ApplyRatios(plan, choice.ratios);
    if (!evaluate && !EstimateFits(ctx, plan, shifted)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no recomputation ratio fits in memory (", plan.pp(), " stages, micro-batch ", plan.micro_batch, ")"));
    }
    auto metrics = evaluate ? evaluate(plan) : EstimateOneFOneB(ctx, plan);
    ++choice.evaluations;
    if (metrics.ok()) {
      choice.metrics = std::move(*metrics);
      return choice;
    }
    // Only a refusal for memory makes a larger ratio worth trying.
    if (metrics.status().code() != absl::StatusCode::kResourceExhausted) return metrics.status();
    last = metrics.status();
  }
  return last;
}

}  // namespace testbed::merak
