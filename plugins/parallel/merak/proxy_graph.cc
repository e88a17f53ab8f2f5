#include "proxy_graph.h"

#include "absl/strings/str_cat.h"
#include "testbed/plan_search.h"
#include "testbed/status_macros.h"

namespace testbed::merak {

absl::StatusOr<std::vector<double>> LayerCosts(const ModelGraph& model, const DeviceModel& device_model,
                                               const DeviceSpec& device, int tp, std::int64_t micro_batch,
                                               bool sequence_parallel, Precision precision) {
  std::vector<double> costs;
  costs.reserve(model.layers.size());
  for (const Layer& layer : model.layers) {
    LayerWork w{&layer, Phase::kForward, micro_batch, tp, sequence_parallel, precision, 1.0, false};
    TESTBED_ASSIGN_OR_RETURN(double f, device_model.LayerTime(w, device));
    w.phase = Phase::kBackward;
    TESTBED_ASSIGN_OR_RETURN(double b, device_model.LayerTime(w, device));
    costs.push_back(f + b);
  }
  return costs;
}

absl::StatusOr<std::vector<StageSpec>> BalancedStages(const std::vector<double>& costs, int parts) {
  const int n = static_cast<int>(costs.size());
  if (parts < 1 || parts > n) {
    return absl::InvalidArgumentError(absl::StrCat("cannot split ", n, " layers into ", parts, " stages"));
  }
  const std::vector<int> counts = MinMaxPartition(costs, parts);
  std::vector<StageSpec> stages;
  int first = 0;
  for (int c : counts) {
    stages.push_back(StageSpec{first, first + c, 0});
    first += c;
  }
  return stages;
}

}  // namespace testbed::merak
