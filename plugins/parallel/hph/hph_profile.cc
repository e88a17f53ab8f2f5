#include "hph_profile.h"

#include "testbed/memory_model.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::hph {

Profiles::Profiles(const PlanningContext& ctx, std::int64_t micro_batch)
    : ctx_(ctx), micro_batch_(micro_batch), bounds_(UnitBoundaries(ctx.model)) {}

absl::StatusOr<const std::vector<UnitProfile>*> Profiles::Of(DeviceId device) {
  const DeviceSpec& spec = ctx_.cluster.spec_of(device);
  if (auto it = by_kind_.find(spec.name); it != by_kind_.end()) return &it->second;
  const std::int64_t mb = micro_batch_;
  std::vector<UnitProfile> units;
  for (size_t u = 0; u + 1 < bounds_.size(); ++u) {
    UnitProfile p;
    for (int l = bounds_[u]; l < bounds_[u + 1]; ++l) {
      const Layer& layer = ctx_.model.layers[static_cast<size_t>(l)];
      LayerWork w{&layer, Phase::kForward, mb, 1, false, ctx_.train.precision, 1.0, false};
      TESTBED_ASSIGN_OR_RETURN(double f, ctx_.device_model.LayerTime(w, spec));
      w.phase = Phase::kBackward;
      TESTBED_ASSIGN_OR_RETURN(double b, ctx_.device_model.LayerTime(w, spec));
      p.fwd_s += f;
      p.bwd_s += b;
      p.params += static_cast<double>(layer.params);
      p.activation += ActivationBytes(layer, static_cast<double>(mb), 1, false, false);
      p.checkpoint += CheckpointBytes(layer, static_cast<double>(mb), 1, false);
      p.output_bytes = static_cast<double>(layer.output_bytes_per_sample) * static_cast<double>(mb);
    }
    units.push_back(p);
  }
  return &by_kind_.emplace(spec.name, std::move(units)).first->second;
}

absl::StatusOr<double> Profiles::ModelTime(DeviceId device) {
  TESTBED_ASSIGN_OR_RETURN(const std::vector<UnitProfile>* units, Of(device));
  double t = 0;
  for (const UnitProfile& u : *units) t += u.fwd_s + u.bwd_s;
  return t;
}

}  // namespace testbed::hph
