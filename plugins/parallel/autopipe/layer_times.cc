#include "layer_times.h"

#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::autopipe {

absl::StatusOr<LayerTimes> SubLayerTimes(const ModelGraph& model, const DeviceModel& device_model,
                                         const DeviceSpec& device, int tp, std::int64_t micro_batch,
                                         bool sequence_parallel, Precision precision) {
  LayerTimes t;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    LayerWork w{&model.layers[i], Phase::kForward, micro_batch, tp, sequence_parallel, precision, 1.0, false};
    TESTBED_ASSIGN_OR_RETURN(double f, device_model.LayerTime(w, device));
    w.phase = Phase::kBackward;
    TESTBED_ASSIGN_OR_RETURN(double b, device_model.LayerTime(w, device));
    t.fwd.push_back(f);
    t.bwd.push_back(b);
    t.begin.push_back(static_cast<int>(i));
  }
  t.begin.push_back(static_cast<int>(model.layers.size()));
  return t;
}

LayerTimes GroupByUnit(const ModelGraph& model, const LayerTimes& sub) {
  LayerTimes t;
  const std::vector<int> units = UnitBoundaries(model);
  for (size_t u = 0; u + 1 < units.size(); ++u) {
    double f = 0, b = 0;
    for (int l = units[u]; l < units[u + 1]; ++l) {
      f += sub.fwd[static_cast<size_t>(l)];
      b += sub.bwd[static_cast<size_t>(l)];
    }
    t.fwd.push_back(f);
    t.bwd.push_back(b);
    t.begin.push_back(units[u]);
  }
  t.begin.push_back(units.back());
  return t;
}

std::vector<StageSpec> StagesFromCounts(const LayerTimes& items, const std::vector<int>& counts) {
  std::vector<StageSpec> stages;
  int item = 0;
  for (int c : counts) {
    stages.push_back(StageSpec{items.begin[static_cast<size_t>(item)], items.begin[static_cast<size_t>(item + c)], 0});
    item += c;
  }
  return stages;
}

}  // namespace testbed::autopipe
