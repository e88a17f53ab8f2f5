// Per pipeline stage: the compute time of one micro-batch's forward and backward (with the
// recomputation the plan asks for), and the parameters held. Shared by the plan and
// simulator backends.
#pragma once

#include "absl/strings/string_view.h"
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "testbed/device_model.h"
#include "testbed/metrics.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"

namespace testbed {

struct StageCosts {
  std::vector<double> time_s;         // per pipeline stage (all its chunks), one micro-batch
  std::vector<std::int64_t> params;   // per pipeline stage
  std::vector<int> layers;            // per pipeline stage
  double max_time_s = 0;
  double mean_time_s = 0;
  double balance = 0;  // max / mean
  std::int64_t max_params = 0;
  [[nodiscard]] Table ToTable() const;
};

[[nodiscard]] absl::StatusOr<StageCosts> ComputeStageCosts(const Plan& plan, const ModelGraph& model,
                                                           const Cluster& cluster, const TrainSettings& train,
                                                           const DeviceModel& device_model);

// Calls into plugin code, turning an escaping exception into an error naming the component.
template <typename F>
auto CallPlugin(absl::string_view kind, absl::string_view name, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(kind, " '", name, "' threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(kind, " '", name, "' threw a non-standard exception"));
  }
}

}  // namespace testbed
