#include "slicer_scheduler.h"

#include <map>

#include "micro_batch_slicer.h"
#include "testbed/status_macros.h"

namespace testbed::autopipe {

std::vector<ParamSpec> SlicerScheduler::Params() {
  std::vector<ParamSpec> params = ExpandOptionParams();
  params.push_back(ParamSpec::Int("sliced", -1).Range(-1, 1024).Unit("micro-batches")
                       .Doc("micro-batches to split at the start (-1: chosen by simulation, 0: none)"));
  params.push_back(ParamSpec::Int("parts", 2).Range(2, 16).Doc("equal parts each sliced micro-batch is split into"));
  return params;
}

absl::StatusOr<std::unique_ptr<Scheduler>> SlicerScheduler::Make(const ParamSet& p) {
  TESTBED_ASSIGN_OR_RETURN(ExpandOptions expand, ExpandOptionsFrom(p));
  TESTBED_ASSIGN_OR_RETURN(std::int64_t sliced, p.Get<std::int64_t>("sliced"));
  TESTBED_ASSIGN_OR_RETURN(std::int64_t parts, p.Get<std::int64_t>("parts"));
  return std::make_unique<SlicerScheduler>(expand, static_cast<int>(sliced), static_cast<int>(parts));
}

absl::StatusOr<PipelineProgram> SlicerScheduler::Program(const SchedulingContext& ctx, int m) const {
  const Plan& plan = ctx.plan;
  if (plan.virtual_stages() != 1) return absl::InvalidArgumentError("autopipe.slicer runs one model chunk per stage");
  const int pp = plan.pp();
  if (sliced_ >= 0) return SlicedOneFOneB(pp, m, sliced_, parts_);

  // Stage compute per phase and fraction, from the device model (cached: two fractions).
  const bool selective = plan.recompute == RecomputeMode::kSelective;
  std::map<std::tuple<int, int, double>, double> cache;
  absl::Status error = absl::OkStatus();
  auto stage_time = [&](int s, Phase phase, double fraction, bool recompute_only) -> double {
    const auto key = std::tuple(s, static_cast<int>(phase) + (recompute_only ? 8 : 0), fraction);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    const StageSpec& st = plan.Chunk(s, 0);
    const DeviceSpec& dev = ctx.cluster.spec_of(plan.DeviceOf(0, s, 0));
    const int end = recompute_only ? st.first_layer + st.recompute_layers : st.end_layer;
    double t = 0;
    for (int l = st.first_layer; l < end; ++l) {
      LayerWork w{&ctx.model.layers[static_cast<size_t>(l)], phase, plan.micro_batch, plan.tp(0), plan.sequence_parallel,
                  ctx.train.precision, fraction, selective && phase == Phase::kBackward};
      auto lt = ctx.device_model.LayerTime(w, dev);
      if (!lt.ok()) {
        error = lt.status();
        return 0.0;
      }
      t += *lt;
    }
    cache[key] = t;
    return t;
  };
  const bool after_gradient = expand_.recompute_after_gradient;
  OpCost cost = [&](int s, PipelineOp::Kind kind, double f) -> double {
    switch (kind) {
      case PipelineOp::Kind::kForward: return stage_time(s, Phase::kForward, f, false);
      case PipelineOp::Kind::kRecompute: return stage_time(s, Phase::kRecompute, f, true);
      case PipelineOp::Kind::kBackward:
        return stage_time(s, Phase::kBackward, f, false) +
               (after_gradient ? stage_time(s, Phase::kRecompute, f, true) : 0.0);
      case PipelineOp::Kind::kOptimizerStep:
        return 0.0;
    }
    return 0.0;
  };
  std::vector<bool> explicit_recompute(static_cast<size_t>(pp), false);
  for (int s = 0; s < pp; ++s) {
    explicit_recompute[static_cast<size_t>(s)] = !after_gradient && plan.Chunk(s, 0).recompute_layers > 0;
  }
  // Activation transfer between neighbouring stages: the boundary layer's output over the
  // path between the two stages' first devices.
  std::vector<double> transfer(static_cast<size_t>(std::max(pp - 1, 0)), 0.0);
  for (int s = 0; s + 1 < pp; ++s) {
    const Layer& out = ctx.model.layers[static_cast<size_t>(plan.Chunk(s, 0).end_layer - 1)];
    double bytes = static_cast<double>(out.output_bytes_per_sample) * static_cast<double>(plan.micro_batch);
    if (plan.sequence_parallel) bytes /= plan.tp(0);
    const DeviceId a = plan.DeviceOf(0, s, 0), b = plan.DeviceOf(0, s + 1, 0);
    const double bw = ctx.cluster.PathBandwidth(a, b);
    transfer[static_cast<size_t>(s)] = (bw > 0 ? bytes / bw : 0.0) + ctx.cluster.PathLatency(a, b);
  }
  TESTBED_ASSIGN_OR_RETURN(SliceChoice choice, ChooseSlices(pp, m, parts_, pp - 1, cost, transfer, explicit_recompute));
  TESTBED_RETURN_IF_ERROR(error);
  return SlicedOneFOneB(pp, m, choice.sliced, parts_);
}

absl::StatusOr<Schedule> SlicerScheduler::BuildSchedule(const SchedulingContext& ctx) {
  return ExpandPipeline(ctx, ProgramSource([this, &ctx](int m) { return Program(ctx, m); }), expand_);
}

}  // namespace testbed::autopipe
