#include "stage_cost_model.h"

#include <limits>

#include "testbed/memory_model.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::piper {

absl::StatusOr<std::vector<Unit>> ProfileUnits(const PlanningContext& ctx, int tp, std::int64_t micro_batch) {
  const std::vector<int> bounds = UnitBoundaries(ctx.model);
  const DeviceSpec& device = ctx.cluster.spec_of(0);
  const bool sp = ctx.parallel.sequence_parallel && tp > 1;
  const double mb = static_cast<double>(micro_batch);
  std::vector<Unit> units;
  for (size_t u = 0; u + 1 < bounds.size(); ++u) {
    Unit unit;
    unit.first_layer = bounds[u];
    unit.end_layer = bounds[u + 1];
    for (int l = bounds[u]; l < bounds[u + 1]; ++l) {
      const Layer& layer = ctx.model.layers[static_cast<size_t>(l)];
      LayerWork w{&layer, Phase::kForward, micro_batch, tp, sp, ctx.train.precision, 1.0, false};
      TESTBED_ASSIGN_OR_RETURN(double f, ctx.device_model.LayerTime(w, device));
      w.phase = Phase::kBackward;
      TESTBED_ASSIGN_OR_RETURN(double b, ctx.device_model.LayerTime(w, device));
      unit.fwd += f;
      unit.bwd += b;
      unit.params += static_cast<double>(layer.params) / tp;
      // Kept activations follow the run's own policy (selective recomputation drops the
      // attention scores); Piper's own choice per stage is full recomputation or not.
      unit.activation += ActivationBytes(layer, mb, tp, sp, ctx.parallel.recompute == RecomputeMode::kSelective);
      unit.checkpoint += CheckpointBytes(layer, mb, tp, sp);
    }
    unit.output_bytes = static_cast<double>(ctx.model.layers[static_cast<size_t>(bounds[u + 1] - 1)].output_bytes_per_sample) *
                        mb / (sp ? tp : 1);
    units.push_back(unit);
  }
  return units;
}

StageChoice CostStage(const std::vector<Unit>& units, int first, int end, int stage, const Environment& env) {
  double f = 0, b = 0, params = 0, act = 0, ckpt = 0;
  for (int i = first; i < end; ++i) {
    const Unit& u = units[static_cast<size_t>(i)];
    f += u.fwd;
    b += u.bwd;
    params += u.params;
    act += u.activation;
    ckpt += u.checkpoint;
  }
  // Transfers: activation in and gradient out at the front, activation out and gradient in at
  // the back, for every micro-batch.
  double comm = 0;
  if (stage > 0) {
    const double bytes = units[static_cast<size_t>(first - 1)].output_bytes;
    comm += 2 * (bytes * env.send_s_per_byte[static_cast<size_t>(stage - 1)] + env.send_latency[static_cast<size_t>(stage - 1)]);
  }
  if (stage + 1 < env.pp) {
    const double bytes = units[static_cast<size_t>(end - 1)].output_bytes;
    comm += 2 * (bytes * env.send_s_per_byte[static_cast<size_t>(stage)] + env.send_latency[static_cast<size_t>(stage)]);
  }
  const double m = env.micro_batches;
  const double sync = params * env.allreduce_s_per_param[static_cast<size_t>(stage)];
  // Under 1F1B stage s holds pp - s micro-batches (at most M): all stashed, one working.
  const double held = std::min<double>(env.pp - stage, m);
  const double fixed = params * env.static_bytes_per_param;
  const double cap = env.capacity_bytes[static_cast<size_t>(stage)];
  StageChoice best{std::numeric_limits<double>::infinity(), false};
  for (bool recompute : {false, true}) {
    const double memory = fixed + (held - 1) * (recompute ? ckpt : act) + act;
    if (memory > cap) continue;
    const double load = m * (f + b + (recompute ? f : 0) + comm) + sync;
    if (load < best.load) best = {load, recompute};
  }
  return best;
}

}  // namespace testbed::piper
