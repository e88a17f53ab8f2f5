#include "engine/stage_costs.h"

#include <algorithm>
#include <numeric>

#include "testbed/status_macros.h"

namespace testbed {

Table StageCosts::ToTable() const {
  Table t;
  t.name = "stages";
  std::vector<std::int64_t> idx(time_s.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::vector<std::int64_t> nl(layers.begin(), layers.end());
  t.columns.push_back({"stage", "", idx});
  t.columns.push_back({"layers", "layers", nl});
  t.columns.push_back({"time_s", "s", time_s});
  t.columns.push_back({"params", "params", params});
  return t;
}

absl::StatusOr<StageCosts> ComputeStageCosts(const Plan& plan, const ModelGraph& model, const Cluster& cluster,
                                             const TrainSettings& train, const DeviceModel& device_model) {
  StageCosts c;
  const int pp = plan.pp();
  c.time_s.assign(static_cast<size_t>(pp), 0.0);
  c.params.assign(static_cast<size_t>(pp), 0);
  c.layers.assign(static_cast<size_t>(pp), 0);
  for (int s = 0; s < pp; ++s) {
    const DeviceSpec& dev = cluster.spec_of(plan.DeviceOf(0, s, 0));
    for (int v = 0; v < plan.virtual_stages(); ++v) {
      const StageSpec& st = plan.Chunk(s, v);
      for (int l = st.first_layer; l < st.end_layer; ++l) {
        const Layer& layer = model.layers[static_cast<size_t>(l)];
        const int tp = plan.LayerTp(l);
        LayerWork w{&layer, Phase::kForward, plan.micro_batch, tp, plan.sequence_parallel,
                    PrecisionOfBits(plan.LayerBits(l).activation_bits, train.precision), 1.0};
        TESTBED_ASSIGN_OR_RETURN(double fwd, device_model.LayerTime(w, dev));
        w.phase = Phase::kBackward;
        TESTBED_ASSIGN_OR_RETURN(double bwd, device_model.LayerTime(w, dev));
        double rec = 0;
        if (l - st.first_layer < st.recompute_layers) {
          w.phase = Phase::kRecompute;
          TESTBED_ASSIGN_OR_RETURN(rec, device_model.LayerTime(w, dev));
        }
        c.time_s[static_cast<size_t>(s)] += fwd + bwd + rec;
        c.params[static_cast<size_t>(s)] += (layer.params + layer.shared_params) / std::max(1, tp);
        c.layers[static_cast<size_t>(s)] += 1;
      }
    }
  }
  c.max_time_s = *std::max_element(c.time_s.begin(), c.time_s.end());
  c.mean_time_s = std::accumulate(c.time_s.begin(), c.time_s.end(), 0.0) / static_cast<double>(c.time_s.size());
  c.balance = c.mean_time_s > 0 ? c.max_time_s / c.mean_time_s : 0;
  c.max_params = *std::max_element(c.params.begin(), c.params.end());
  return c;
}

}  // namespace testbed
