#include "unit_costs.h"

#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::dapple {

absl::StatusOr<UnitCosts> ProfileUnits(const PlanningContext& ctx, int tp, std::int64_t micro_batch) {
  const std::vector<int> units = UnitBoundaries(ctx.model);
  const DeviceSpec& device = ctx.cluster.spec_of(0);
  const bool sp = ctx.parallel.sequence_parallel && tp > 1;
  UnitCosts c;
  for (size_t u = 0; u + 1 < units.size(); ++u) {
    double f = 0, b = 0, params = 0;
    for (int l = units[u]; l < units[u + 1]; ++l) {
      const Layer& layer = ctx.model.layers[static_cast<size_t>(l)];
      LayerWork w{&layer, Phase::kForward, micro_batch, tp, sp, ctx.train.precision, 1.0, false};
      TESTBED_ASSIGN_OR_RETURN(double lf, ctx.device_model.LayerTime(w, device));
      w.phase = Phase::kBackward;
      TESTBED_ASSIGN_OR_RETURN(double lb, ctx.device_model.LayerTime(w, device));
      f += lf;
      b += lb;
      params += static_cast<double>(layer.params) / tp;
    }
    const Layer& last = ctx.model.layers[static_cast<size_t>(units[u + 1] - 1)];
    c.fwd.push_back(f);
    c.bwd.push_back(b);
    c.params.push_back(params);
    c.output_bytes.push_back(static_cast<double>(last.output_bytes_per_sample) * static_cast<double>(micro_batch) /
                             (sp ? tp : 1));
    c.begin.push_back(units[u]);
  }
  c.begin.push_back(units.back());
  return c;
}

}  // namespace testbed::dapple
